"""The rules of `mi validate`, one module per family; `workflows/validate.py` runs them in order.

catalog (IDs, severities, help) -> context (the model, settings, `report()`) -> loading (MI1xx),
checker (MI2xx), integrity (MI3xx), runtime + kernels (MI4xx), quant + quant_range + weights
(MI5xx), hints (MI6xx), against (MI7xx).
"""
