/* Test tooling only (tests/providers/routes.py): loads OpenVINO's plugin EP library (the path in
   OV_PLUGIN_LIBRARY) and hands it onnxruntime's API table with HardwareDevice_VendorId answering
   Intel's id, so the plugin, which offers Intel devices only, offers this machine's CPU whatever its
   vendor. Every other call is the real plugin's and the real onnxruntime's. The entry is found by
   its code: HardwareDevice_Type (`mov eax,[rdi]; ret`) followed by HardwareDevice_VendorId
   (`mov eax,[rdi+4]; ret`), the order of onnxruntime_c_api.h; x86-64 only. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { const void* (*GetApi)(uint32_t); const char* (*GetVersionString)(void); } ApiBase;
typedef void* (*CreateFn)(const char*, const ApiBase*, const void*, void**, size_t, size_t*);
typedef void* (*ReleaseFn)(void*);

static const ApiBase* real_base;
static ApiBase fake_base;
static const void** patched;
static CreateFn real_create;
static ReleaseFn real_release;

static uint32_t intel_vendor_id(const void* device) { (void)device; return 0x8086; }

static const unsigned char* body(const void* fn) {
  const unsigned char* p = fn;
  if (p[0] == 0xf3 && p[1] == 0x0f && p[2] == 0x1e && p[3] == 0xfa) p += 4; /* endbr64 */
  return p;
}

static const void* fake_get_api(uint32_t version) {
  const void** api = (const void**)real_base->GetApi(version);
  if (api == NULL || patched != NULL) return patched ? (const void*)patched : (const void*)api;
  const size_t n = 1024;
  patched = malloc(n * sizeof(void*));
  memcpy(patched, api, n * sizeof(void*));
  for (size_t i = 1; i < n; i++) {
    Dl_info a, b;
    if (!dladdr(api[i], &a) || !dladdr(api[i - 1], &b)) continue;
    const unsigned char* type = body(api[i - 1]);
    const unsigned char* vendor = body(api[i]);
    if (type[0] == 0x8b && type[1] == 0x07 && type[2] == 0xc3 &&
        vendor[0] == 0x8b && vendor[1] == 0x47 && vendor[2] == 0x04 && vendor[3] == 0xc3) {
      patched[i] = (const void*)intel_vendor_id;
      return patched;
    }
  }
  fprintf(stderr, "ov_vendor_shim: HardwareDevice_VendorId not found\n");
  return patched;
}

void* CreateEpFactories(const char* name, const ApiBase* base, const void* logger, void** factories,
                        size_t max, size_t* count) {
  const char* path = getenv("OV_PLUGIN_LIBRARY");
  void* lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
  if (lib == NULL) { fprintf(stderr, "ov_vendor_shim: %s\n", dlerror()); abort(); }
  real_create = (CreateFn)dlsym(lib, "CreateEpFactories");
  real_release = (ReleaseFn)dlsym(lib, "ReleaseEpFactory");
  real_base = base;
  fake_base.GetApi = fake_get_api;
  fake_base.GetVersionString = base->GetVersionString;
  return real_create(name, &fake_base, logger, factories, max, count);
}

void* ReleaseEpFactory(void* factory) { return real_release(factory); }
