"""Rendering: results -> tables (rich, tabulate), HTML, JUnit, Model Explorer data. Only here touches rich."""
