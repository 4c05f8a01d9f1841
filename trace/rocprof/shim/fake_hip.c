/*
 * Interface-test stand-in for libamdhip64.so: the HIP module-API calls zyfa's rocprof tracer makes
 * (hipInit, hipModuleLoadData, hipModuleGetFunction, hipMalloc, hipMemset, hipFree,
 * hipModuleLaunchKernel with HIP_LAUNCH_PARAM_* "extra" kernargs, hipDeviceSynchronize,
 * hipModuleUnload, hipGetErrorString), with the signatures of hip_runtime_api.h.
 *
 * Nothing runs on a GPU. hipModuleLaunchKernel records what it was given (fakehip_* getters) and
 * plays the dispatch through the fake rocprofiler-sdk shim loaded from $ZYFA_FAKE_HIP_SDK: it calls
 * that library's shim_run_dispatch() with the loaded code object and the toy shader-data streams
 * read from the files $ZYFA_FAKE_HIP_SE0 / $ZYFA_FAKE_HIP_SE1, as the runtime + SDK would
 * deliver a real dispatch's thread trace.
 *
 * Build: gcc -shared -fPIC -Wl,-Bsymbolic -o libamdhip64.so fake_hip.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int hipError_t;
enum { hipSuccess = 0, hipErrorInvalidValue = 1, hipErrorNotFound = 500, hipErrorLaunchFailure = 719 };

static uint8_t* g_image;
static uint64_t g_image_size;
static char g_function[256];
static uint8_t g_kernargs[4096];
static uint64_t g_kernargs_size, g_malloc_bytes, g_last_ptr;
static unsigned g_grid[3], g_block[3];
static int g_memset_value = -1, g_initialized, g_synchronized, g_freed;

/* test getters */
uint64_t fakehip_kernargs(uint8_t* out, uint64_t cap) {
    uint64_t n = g_kernargs_size < cap ? g_kernargs_size : cap;
    memcpy(out, g_kernargs, n);
    return g_kernargs_size;
}
unsigned fakehip_dim(int which) { return which < 3 ? g_grid[which] : g_block[which - 3]; }
uint64_t fakehip_malloc_bytes(void) { return g_malloc_bytes; }
uint64_t fakehip_last_ptr(void) { return g_last_ptr; }
int fakehip_memset_value(void) { return g_memset_value; }
int fakehip_state(void) { return g_initialized + 2 * g_synchronized + 4 * g_freed; }
const char* fakehip_function(void) { return g_function; }

const char* hipGetErrorString(hipError_t e) {
    switch(e) {
        case hipSuccess: return "hipSuccess";
        case hipErrorInvalidValue: return "hipErrorInvalidValue";
        case hipErrorNotFound: return "hipErrorNotFound";
        case hipErrorLaunchFailure: return "hipErrorLaunchFailure";
        default: return "unknown hipError";
    }
}

hipError_t hipInit(unsigned flags) { (void) flags; g_initialized = 1; return hipSuccess; }

/* size of an ELF64 image from its header: section headers come last */
hipError_t hipModuleLoadData(void** module, const void* image) {
    const uint8_t* p = image;
    if(!p || memcmp(p, "\x7f" "ELF", 4) != 0) return hipErrorInvalidValue;
    uint64_t shoff; uint16_t shentsize, shnum;
    memcpy(&shoff, p + 0x28, 8); memcpy(&shentsize, p + 0x3A, 2); memcpy(&shnum, p + 0x3C, 2);
    g_image_size = shoff + (uint64_t) shentsize * shnum;
    free(g_image);
    g_image = malloc(g_image_size);
    memcpy(g_image, p, g_image_size);
    *module = g_image;
    return hipSuccess;
}

hipError_t hipModuleGetFunction(void** function, void* module, const char* name) {
    if(module != g_image || !name) return hipErrorInvalidValue;
    snprintf(g_function, sizeof(g_function), "%s", name);
    *function = g_function;
    return hipSuccess;
}

hipError_t hipMalloc(void** ptr, size_t size) {
    *ptr = malloc(size);
    g_malloc_bytes = size;
    g_last_ptr = (uint64_t) (uintptr_t) *ptr;
    return *ptr ? hipSuccess : hipErrorInvalidValue;
}

hipError_t hipMemset(void* dst, int value, size_t size) { memset(dst, value, size); g_memset_value = value; return hipSuccess; }
hipError_t hipFree(void* ptr) { free(ptr); g_freed = 1; return hipSuccess; }
hipError_t hipModuleUnload(void* module) { return module == g_image ? hipSuccess : hipErrorInvalidValue; }
hipError_t hipDeviceSynchronize(void) { g_synchronized = 1; return hipSuccess; }

static uint8_t* read_file(const char* env, uint64_t* n) {
    const char* path = getenv(env);
    *n = 0;
    if(!path) return NULL;
    FILE* f = fopen(path, "rb");
    if(!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t* buf = malloc((size_t) size);
    *n = fread(buf, 1, (size_t) size, f);
    fclose(f);
    return buf;
}

typedef int (*run_dispatch_t)(const void*, uint64_t, uint64_t, const uint8_t*, uint64_t, const uint8_t*, uint64_t, uint64_t);

hipError_t hipModuleLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned shared, void* stream, void** params, void** extra) {
    (void) shared; (void) stream;
    if(f != g_function || params != NULL || extra == NULL) return hipErrorInvalidValue;
    if(extra[0] != (void*) 1 || extra[2] != (void*) 2 || extra[4] != (void*) 3) return hipErrorInvalidValue;
    g_kernargs_size = *(size_t*) extra[3];
    if(g_kernargs_size > sizeof(g_kernargs)) return hipErrorInvalidValue;
    memcpy(g_kernargs, extra[1], g_kernargs_size);
    g_grid[0] = gx; g_grid[1] = gy; g_grid[2] = gz;
    g_block[0] = bx; g_block[1] = by; g_block[2] = bz;
    const char* sdk = getenv("ZYFA_FAKE_HIP_SDK");
    void* handle = sdk ? dlopen(sdk, RTLD_NOW | RTLD_NOLOAD) : NULL;
    run_dispatch_t run = handle ? (run_dispatch_t) dlsym(handle, "shim_run_dispatch") : NULL;
    if(!run) return hipErrorNotFound;
    uint64_t n0, n1;
    uint8_t* se0 = read_file("ZYFA_FAKE_HIP_SE0", &n0);
    uint8_t* se1 = read_file("ZYFA_FAKE_HIP_SE1", &n1);
    int calls = run(g_image, g_image_size, 0x7f0000000000ull, se0, n0, se1, n1, n0 / 2);
    free(se0); free(se1);
    dlclose(handle);
    return calls > 0 ? hipSuccess : hipErrorLaunchFailure;
}
