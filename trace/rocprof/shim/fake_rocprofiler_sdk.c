/*
 * Interface-test stand-in for librocprofiler-sdk.so (thread trace + decoder wrapper).
 *
 * Exports the same C symbols with the same signatures as rocprofiler-sdk's headers
 * (registration.h, context.h, agent.h, callback_tracing.h, experimental/thread-trace/{core,
 * dispatch,trace_decoder,trace_decoder_types}.h) and calls the tool's callbacks the way the real
 * library does, so zyfa's ctypes binding is exercised without a GPU: struct layouts, callback
 * signatures, callback lifetimes (buffers are scribbled over and freed after each callback
 * returns) and error statuses. It traces nothing: shim_run_dispatch() plays one dispatch.
 *
 * Build: gcc -shared -fPIC -Wl,-Bsymbolic -DZYFA_SHIM_ABI={5,6,7} -o libfake.so fake_rocprofiler_sdk.c
 *   ZYFA_SHIM_ABI 5: shader callback (agent, se, data, size, userdata)        SDK 1.0-1.2
 *                 6: shader callback (agent, se, data, size, flags, userdata) SDK 1.3
 *                 7: shader callback (rocprofiler_thread_trace_shader_data_t, userdata)
 *
 * "Shader data" here is a toy stream, not SQTT: the 8-byte magic "ZYFATOY1", then 32-byte records
 * struct toy_record below: kind 1 = wave begin (time), 2 = instruction, 3 = wave end (time),
 * 4 = clock pair (time = shader clock, vaddr = realtime clock at 100 MHz).
 * rocprofiler_trace_decode() turns it into real decoder records (GFXIP, RT_FREQUENCY, REALTIME,
 * OCCUPANCY, WAVE, INFO).
 * An instruction whose vaddr is UINT64_MAX cannot be placed: marker_id 0 and an
 * INFO_STITCH_INCOMPLETE record, as the real decoder does for code it was not given.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ZYFA_SHIM_ABI
#define ZYFA_SHIM_ABI 5
#endif

/* -- types, as in the headers ---------------------------------------------------------------- */
typedef int rocprofiler_status_t;
enum { ST_SUCCESS = 0, ST_ERROR = 1, ST_CONTEXT_NOT_FOUND = 2, ST_AGENT_NOT_FOUND = 7,
       ST_SERVICE_ALREADY_CONFIGURED = 14, ST_CONFIGURATION_LOCKED = 15, ST_INCOMPATIBLE_ABI = 17,
       ST_INVALID_ARGUMENT = 18, ST_NOT_AVAILABLE = 36 };
typedef union { uint64_t value; void* ptr; } rocprofiler_user_data_t;
typedef struct { uint64_t handle; } rocprofiler_handle_t;
typedef rocprofiler_handle_t rocprofiler_context_id_t, rocprofiler_agent_id_t, rocprofiler_queue_id_t,
    rocprofiler_thread_trace_decoder_id_t, hsa_agent_t;
typedef struct { uint64_t internal; rocprofiler_user_data_t external; } rocprofiler_correlation_id_t;
typedef struct { const char* name; const uint32_t handle; } rocprofiler_client_id_t;
typedef void (*rocprofiler_client_finalize_t)(rocprofiler_client_id_t);
typedef int (*rocprofiler_tool_initialize_t)(rocprofiler_client_finalize_t, void*);
typedef void (*rocprofiler_tool_finalize_t)(void*);
typedef struct {
    size_t size;
    rocprofiler_tool_initialize_t initialize;
    rocprofiler_tool_finalize_t finalize;
    void* tool_data;
} rocprofiler_tool_configure_result_t;
typedef rocprofiler_tool_configure_result_t* (*rocprofiler_configure_func_t)(uint32_t, const char*, uint32_t,
                                                                              rocprofiler_client_id_t*);
/* rocprofiler_agent_v0_t is much larger; its head is what tools may rely on */
typedef struct { uint64_t size; rocprofiler_agent_id_t id; int type; uint32_t cpu_cores_count;
                 uint32_t simd_count; char rest[400]; } shim_agent_t;
typedef rocprofiler_status_t (*rocprofiler_query_available_agents_cb_t)(int, const void**, size_t, void*);

typedef struct {
    rocprofiler_context_id_t context_id;
    uint64_t thread_id;
    rocprofiler_correlation_id_t correlation_id;
    int kind, operation, phase;
    void* payload;
} rocprofiler_callback_tracing_record_t;
typedef void (*rocprofiler_callback_tracing_cb_t)(rocprofiler_callback_tracing_record_t, rocprofiler_user_data_t*, void*);
typedef struct {
    uint64_t size, code_object_id;
    rocprofiler_agent_id_t rocp_agent;
    hsa_agent_t hsa_agent;
    const char* uri;
    uint64_t load_base, load_size;
    int64_t load_delta;
    int storage_type;
    union { struct { int storage_file; }; struct { uint64_t memory_base, memory_size; }; };
} rocprofiler_callback_tracing_code_object_load_data_t;

typedef struct {
    int type;
    union { uint64_t value; struct { rocprofiler_handle_t counter_id; uint64_t simd_mask : 4; }; };
} rocprofiler_thread_trace_parameter_t;
typedef int (*rocprofiler_thread_trace_dispatch_callback_t)(rocprofiler_agent_id_t, rocprofiler_queue_id_t,
    rocprofiler_correlation_id_t, uint64_t, uint64_t, void*, rocprofiler_user_data_t*);
typedef struct { uint64_t gpu_clock, system_clock; } rocprofiler_thread_trace_timestamp_t;
typedef struct {
    uint64_t size;
    void* data;
    uint64_t data_size;
    int64_t shader_engine_id;
    uint64_t chunk_index, read_offset;
    rocprofiler_agent_id_t agent;
    int flags;
    rocprofiler_thread_trace_timestamp_t start_timestamp, end_timestamp;
} rocprofiler_thread_trace_shader_data_t;
#if ZYFA_SHIM_ABI == 5
typedef void (*shader_cb_t)(rocprofiler_agent_id_t, int64_t, void*, size_t, rocprofiler_user_data_t);
#elif ZYFA_SHIM_ABI == 6
typedef void (*shader_cb_t)(rocprofiler_agent_id_t, int64_t, void*, size_t, int, rocprofiler_user_data_t);
#else
typedef void (*shader_cb_t)(rocprofiler_thread_trace_shader_data_t, rocprofiler_user_data_t);
#endif

typedef struct { uint64_t addr, marker_id; } dec_pc_t;
typedef struct { dec_pc_t pc; uint64_t time; uint8_t reserved, cu, simd, wave_id; uint32_t start : 1, _rsvd : 31; } dec_occupancy_t;
typedef struct { int32_t type, duration; } dec_wave_state_t;
typedef struct { uint32_t category : 8, stall : 24; int32_t duration; int64_t time; dec_pc_t pc; } dec_inst_t;
typedef struct {
    uint8_t cu, simd, wave_id, contexts;
    uint32_t _rsvd1, _rsvd2, _rsvd3;
    int64_t begin_time, end_time;
    uint64_t timeline_size, instructions_size;
    dec_wave_state_t* timeline_array;
    dec_inst_t* instructions_array;
} dec_wave_t;
typedef void (*dec_callback_t)(int, void*, uint64_t, void*);
typedef struct { int64_t shader_clock; uint64_t realtime_clock, reserved; } dec_realtime_t;
enum { REC_GFXIP = 0, REC_OCCUPANCY = 1, REC_WAVE = 3, REC_INFO = 4, REC_REALTIME = 7, REC_RT_FREQUENCY = 8,
       INFO_STITCH_INCOMPLETE = 2 };

struct toy_record {
    uint8_t kind, cu, simd, slot, category, pad[3];
    uint32_t stall;
    int32_t duration;
    int64_t time;
    uint64_t vaddr;
};

/* -- state ------------------------------------------------------------------------------------ */
static uint32_t g_version[3] = {1, 1, 0};
static int g_locked, g_configured, g_context_started, g_init_status = -99;
static uint64_t g_next_context = 1;
static rocprofiler_tool_configure_result_t* g_tool;
static rocprofiler_callback_tracing_cb_t g_code_cb;
static void* g_code_cb_arg;
static rocprofiler_thread_trace_dispatch_callback_t g_dispatch_cb;
static shader_cb_t g_shader_cb;
static void* g_tt_userdata;
static uint64_t g_params[16];
static int g_param_seen[16];
static uint64_t g_decoder_next = 1, g_decoder_missing;
static int g_storage_file; /* deliver code objects as an open file (STORAGE_TYPE_FILE) */
static uint64_t g_loaded_id, g_loaded_base, g_loaded_size;
static shim_agent_t g_agents[2] = {
    {sizeof(shim_agent_t), {100}, 1, 64, 0, {0}},
    {sizeof(shim_agent_t), {200}, 2, 0, 1024, {0}},
};

/* -- test controls ---------------------------------------------------------------------------- */
void shim_set_version(uint32_t major, uint32_t minor, uint32_t patch) {
    g_version[0] = major; g_version[1] = minor; g_version[2] = patch;
}
void shim_set_locked(int locked) { g_locked = locked; }
void shim_set_decoder_missing(int missing) { g_decoder_missing = (uint64_t) missing; }
void shim_set_storage_file(int on) { g_storage_file = on; }
int shim_abi(void) { return ZYFA_SHIM_ABI; }
int shim_init_status(void) { return g_init_status; }
int shim_context_started(void) { return g_context_started; }
int shim_param_seen(int type) { return type >= 0 && type < 16 ? g_param_seen[type] : 0; }
uint64_t shim_param(int type) { return type >= 0 && type < 16 ? g_params[type] : 0; }
uint64_t shim_loaded_code_object(void) { return g_loaded_id; }

/* -- registration, contexts, agents ----------------------------------------------------------- */
rocprofiler_status_t rocprofiler_get_version(uint32_t* major, uint32_t* minor, uint32_t* patch) {
    *major = g_version[0]; *minor = g_version[1]; *patch = g_version[2];
    return ST_SUCCESS;
}

const char* rocprofiler_get_status_string(rocprofiler_status_t status) {
    switch(status) {
        case ST_SUCCESS: return "ROCPROFILER_STATUS_SUCCESS";
        case ST_ERROR: return "ROCPROFILER_STATUS_ERROR";
        case ST_CONTEXT_NOT_FOUND: return "ROCPROFILER_STATUS_ERROR_CONTEXT_NOT_FOUND";
        case ST_AGENT_NOT_FOUND: return "ROCPROFILER_STATUS_ERROR_AGENT_NOT_FOUND";
        case ST_SERVICE_ALREADY_CONFIGURED: return "ROCPROFILER_STATUS_ERROR_SERVICE_ALREADY_CONFIGURED";
        case ST_CONFIGURATION_LOCKED: return "ROCPROFILER_STATUS_ERROR_CONFIGURATION_LOCKED";
        case ST_INCOMPATIBLE_ABI: return "ROCPROFILER_STATUS_ERROR_INCOMPATIBLE_ABI";
        case ST_INVALID_ARGUMENT: return "ROCPROFILER_STATUS_ERROR_INVALID_ARGUMENT";
        case ST_NOT_AVAILABLE: return "ROCPROFILER_STATUS_ERROR_NOT_AVAILABLE";
        default: return NULL;
    }
}

static void client_finalize(rocprofiler_client_id_t id) { (void) id; }

rocprofiler_status_t rocprofiler_force_configure(rocprofiler_configure_func_t configure) {
    if(g_locked || g_configured) return ST_CONFIGURATION_LOCKED;
    rocprofiler_client_id_t client = {NULL, 7};
    uint32_t version = 10000 * g_version[0] + 100 * g_version[1] + g_version[2];
    g_tool = configure(version, "fake rocprofiler-sdk shim", 0, &client);
    if(g_tool == NULL) return ST_SUCCESS; /* the tool declined */
    if(g_tool->size != sizeof(rocprofiler_tool_configure_result_t) || client.name == NULL) return ST_INCOMPATIBLE_ABI;
    g_configured = 1;
    g_init_status = g_tool->initialize(client_finalize, g_tool->tool_data);
    return ST_SUCCESS;
}

rocprofiler_status_t rocprofiler_create_context(rocprofiler_context_id_t* ctx) {
    if(!g_configured) return ST_CONFIGURATION_LOCKED;
    ctx->handle = g_next_context++;
    return ST_SUCCESS;
}

rocprofiler_status_t rocprofiler_start_context(rocprofiler_context_id_t ctx) {
    if(ctx.handle == 0 || ctx.handle >= g_next_context) return ST_CONTEXT_NOT_FOUND;
    g_context_started = 1;
    return ST_SUCCESS;
}

rocprofiler_status_t rocprofiler_stop_context(rocprofiler_context_id_t ctx) {
    if(ctx.handle == 0 || ctx.handle >= g_next_context) return ST_CONTEXT_NOT_FOUND;
    g_context_started = 0;
    return ST_SUCCESS;
}

rocprofiler_status_t rocprofiler_query_available_agents(int version, rocprofiler_query_available_agents_cb_t cb,
                                                        size_t agent_size, void* user_data) {
    if(version != 1) return ST_INVALID_ARGUMENT;
    if(agent_size > sizeof(shim_agent_t)) return ST_INCOMPATIBLE_ABI;
    const void* ptrs[2] = {&g_agents[0], &g_agents[1]};
    return cb(version, ptrs, 2, user_data);
}

/* -- services --------------------------------------------------------------------------------- */
rocprofiler_status_t rocprofiler_configure_callback_tracing_service(rocprofiler_context_id_t ctx, int kind,
    const int* operations, size_t operations_count, rocprofiler_callback_tracing_cb_t cb, void* arg) {
    if(ctx.handle == 0 || ctx.handle >= g_next_context) return ST_CONTEXT_NOT_FOUND;
    if(kind != 10 || operations_count != 1 || operations[0] != 1) return ST_INVALID_ARGUMENT;
    if(g_code_cb) return ST_SERVICE_ALREADY_CONFIGURED;
    g_code_cb = cb;
    g_code_cb_arg = arg;
    return ST_SUCCESS;
}

rocprofiler_status_t rocprofiler_configure_dispatch_thread_trace_service(rocprofiler_context_id_t ctx,
    rocprofiler_agent_id_t agent, rocprofiler_thread_trace_parameter_t* params, size_t n,
    rocprofiler_thread_trace_dispatch_callback_t dispatch_cb, shader_cb_t shader_cb, void* userdata) {
    if(ctx.handle == 0 || ctx.handle >= g_next_context) return ST_CONTEXT_NOT_FOUND;
    if(agent.handle != 200) return ST_AGENT_NOT_FOUND;
    for(size_t i = 0; i < n; i++) {
        if(params[i].type < 0 || params[i].type > 9) return ST_INVALID_ARGUMENT;
        g_params[params[i].type] = params[i].value;
        g_param_seen[params[i].type] = 1;
    }
    g_dispatch_cb = dispatch_cb;
    g_shader_cb = shader_cb;
    g_tt_userdata = userdata;
    return ST_SUCCESS;
}

/* -- one dispatch, played to the tool --------------------------------------------------------- */
static void deliver(int64_t se, const uint8_t* bytes, uint64_t n, uint64_t chunk_index, int flags,
                    rocprofiler_user_data_t userdata) {
    const uint64_t offset = 8; /* struct ABI: valid data starts at read_offset */
    uint8_t* buf = malloc(n + offset);
    memset(buf, 0xEE, offset);
    memcpy(buf + offset, bytes, n);
    rocprofiler_agent_id_t agent = {200};
#if ZYFA_SHIM_ABI == 5
    (void) chunk_index; (void) flags;
    g_shader_cb(agent, se, buf + offset, n, userdata);
#elif ZYFA_SHIM_ABI == 6
    (void) chunk_index;
    g_shader_cb(agent, se, buf + offset, n, flags, userdata);
#else
    rocprofiler_thread_trace_shader_data_t args = {sizeof(args), buf, n + offset, se, chunk_index, offset,
                                                   agent, flags, {1000, 2000}, {1500, 2500}};
    g_shader_cb(args, userdata);
#endif
    memset(buf, 0xAB, n + offset); /* the tool must have copied what it wanted */
    free(buf);
}

/* Plays one kernel dispatch: code-object load, dispatch callback, shader data for SE0 (split in
 * two chunks, the second flagged END) and SE1 (one chunk). Returns the number of shader-data
 * callbacks made, or -1 if the tool configured no thread-trace service. */
int shim_run_dispatch(const void* code_object, uint64_t co_size, uint64_t load_base,
                      const uint8_t* se0, uint64_t n0, const uint8_t* se1, uint64_t n1, uint64_t split) {
    if(!g_dispatch_cb || !g_shader_cb) return -1;
    if(g_code_cb && code_object) {
        void* copy = malloc(co_size);
        memcpy(copy, code_object, co_size);
        rocprofiler_callback_tracing_code_object_load_data_t load;
        memset(&load, 0, sizeof(load));
        load.size = sizeof(load);
        load.code_object_id = 5;
        load.rocp_agent.handle = 200;
        load.uri = "memory://1234#offset=0&size=0";
        load.load_base = load_base;
        load.load_size = co_size;
        FILE* file = NULL;
        if(g_storage_file) {
            file = tmpfile();
            fwrite(copy, 1, co_size, file);
            fflush(file);
            load.storage_type = 1; /* FILE */
            load.storage_file = fileno(file);
        } else {
            load.storage_type = 2; /* MEMORY */
            load.memory_base = (uint64_t) (uintptr_t) copy;
            load.memory_size = co_size;
        }
        rocprofiler_callback_tracing_record_t record = {{1}, 77, {9, {0}}, 10, 1, 1, &load};
        rocprofiler_user_data_t user = {0};
        g_code_cb(record, &user, g_code_cb_arg);
        if(file) fclose(file);
        memset(copy, 0xAB, co_size);
        free(copy);
    }
    rocprofiler_correlation_id_t corr = {42, {0}};
    rocprofiler_user_data_t shader_user = {0};
    int control = g_dispatch_cb((rocprofiler_agent_id_t){200}, (rocprofiler_queue_id_t){3}, corr, 11, 12,
                                g_tt_userdata, &shader_user);
    if(control != 3) return 0;
    int calls = 0;
    if(split > n0) split = n0;
    deliver(0, se0, split, 0, 0, shader_user); calls++;
    deliver(0, se0 + split, n0 - split, 1, 1, shader_user); calls++;
    if(se1 && n1) { deliver(1, se1, n1, 2, 1 | 2, shader_user); calls++; }
    return calls;
}

/* -- decoder wrapper -------------------------------------------------------------------------- */
rocprofiler_status_t rocprofiler_thread_trace_decoder_create(rocprofiler_thread_trace_decoder_id_t* handle,
                                                             const char* path) {
    if(handle == NULL || path == NULL) return ST_INVALID_ARGUMENT;
    if(g_decoder_missing) return ST_NOT_AVAILABLE;
    handle->handle = g_decoder_next++;
    return ST_SUCCESS;
}

void rocprofiler_thread_trace_decoder_destroy(rocprofiler_thread_trace_decoder_id_t handle) { (void) handle; }

rocprofiler_status_t rocprofiler_thread_trace_decoder_codeobj_load(rocprofiler_thread_trace_decoder_id_t handle,
    uint64_t load_id, uint64_t load_addr, uint64_t load_size, const void* data, uint64_t size) {
    if(handle.handle == 0) return ST_INVALID_ARGUMENT;
    if(size < 4 || memcmp(data, "\x7f" "ELF", 4) != 0) return ST_ERROR;
    g_loaded_id = load_id; g_loaded_base = load_addr; g_loaded_size = load_size;
    return ST_SUCCESS;
}

const char* rocprofiler_thread_trace_decoder_info_string(rocprofiler_thread_trace_decoder_id_t handle, int info) {
    (void) handle;
    switch(info) {
        case 1: return "Data lost";
        case 2: return "Stitch incomplete: code object not loaded";
        case 3: return "Wave incomplete";
        default: return NULL;
    }
}

rocprofiler_status_t rocprofiler_trace_decode(rocprofiler_thread_trace_decoder_id_t handle, dec_callback_t cb,
                                              void* data, uint64_t size, void* userdata) {
    if(handle.handle == 0 || cb == NULL || data == NULL) return ST_INVALID_ARGUMENT;
    if(size < 8 || memcmp(data, "ZYFATOY1", 8) != 0 || (size - 8) % sizeof(struct toy_record) != 0) return ST_ERROR;
    const struct toy_record* rec = (const struct toy_record*) ((const uint8_t*) data + 8);
    uint64_t n = (size - 8) / sizeof(struct toy_record);
    cb(REC_GFXIP, (void*) (uintptr_t) 9, 0, userdata);
    uint64_t rt_frequency = 100000000;
    cb(REC_RT_FREQUENCY, &rt_frequency, 1, userdata);
    dec_wave_t wave;
    dec_inst_t* insts = NULL;
    dec_wave_state_t state = {2, 0};
    uint64_t count = 0;
    for(uint64_t i = 0; i < n; i++) {
        dec_occupancy_t occ;
        memset(&occ, 0, sizeof(occ));
        if(rec[i].kind == 1) {
            memset(&wave, 0, sizeof(wave));
            wave.cu = rec[i].cu; wave.simd = rec[i].simd; wave.wave_id = rec[i].slot;
            wave.begin_time = rec[i].time;
            free(insts);
            insts = calloc(n, sizeof(dec_inst_t));
            count = 0;
            occ.pc.addr = 0x1000; occ.pc.marker_id = g_loaded_id; occ.time = (uint64_t) rec[i].time;
            occ.cu = rec[i].cu; occ.simd = rec[i].simd; occ.wave_id = rec[i].slot; occ.start = 1;
            cb(REC_OCCUPANCY, &occ, 1, userdata);
        } else if(rec[i].kind == 2 && insts) {
            dec_inst_t* inst = &insts[count++];
            inst->category = rec[i].category;
            inst->stall = rec[i].stall;
            inst->duration = rec[i].duration;
            inst->time = rec[i].time;
            if(rec[i].vaddr == UINT64_MAX || g_loaded_id == 0) {
                int info = INFO_STITCH_INCOMPLETE;
                inst->pc.addr = 0x7fff0000; inst->pc.marker_id = 0;
                cb(REC_INFO, &info, 1, userdata);
            } else {
                inst->pc.addr = rec[i].vaddr; inst->pc.marker_id = g_loaded_id;
            }
        } else if(rec[i].kind == 4) {
            dec_realtime_t rt = {rec[i].time, rec[i].vaddr, 0};
            cb(REC_REALTIME, &rt, 1, userdata);
        } else if(rec[i].kind == 3 && insts) {
            wave.end_time = rec[i].time;
            state.duration = (int32_t) (wave.end_time - wave.begin_time);
            wave.timeline_size = 1; wave.timeline_array = &state;
            wave.instructions_size = count; wave.instructions_array = insts;
            cb(REC_WAVE, &wave, 1, userdata);
            memset(insts, 0xAB, n * sizeof(dec_inst_t)); /* records live only during the callback */
            occ.time = (uint64_t) rec[i].time; occ.cu = wave.cu; occ.simd = wave.simd; occ.wave_id = wave.wave_id;
            cb(REC_OCCUPANCY, &occ, 1, userdata);
        } else {
            free(insts);
            return ST_ERROR;
        }
    }
    free(insts);
    return ST_SUCCESS;
}
