// kernelscope in-process metric collector, loaded into a CUDA process through CUDA_INJECTION64_PATH.
//
// It collects hardware metrics (the same Perfworks metric names Nsight Compute uses) for selected kernel
// launches with CUPTI's Range Profiler: auto ranges, kernel replay, one launch per range. No separate
// profiler process: the program runs once, and each selected launch is replayed in place as many times
// as its metrics need passes.
//
// Environment:
//   KERNELSCOPE_METRICS_DIR       where metrics-<pid>.jsonl is written (required: nothing happens without it)
//   KERNELSCOPE_METRICS           comma-separated metric names
//   KERNELSCOPE_METRICS_FILTER    "per-config" (default): the first launch of each kernel and launch
//                                 configuration (grid, block, dynamic shared memory); "per-kernel": the
//                                 first launch of each kernel; "all": every launch
//   KERNELSCOPE_METRICS_MAX       at most this many launches are profiled (default 64)
//   KERNELSCOPE_METRICS_KERNELS   only kernels whose mangled or demangled name contains one of these
//                                 '|'-separated substrings (default: every kernel)
//
// Line formats:
//   {"t":"meta","pid":..,"chip":"GH100","metrics":[..],"refused":[..],"passes":N,"device":{..}}
//   {"t":"launch","seq":..,"name":"<mangled>","demangled":"..","grid":[x,y,z],"block":[x,y,z],"dyn_smem":..,
//    "regs":..,"static_smem":..,"local_bytes":..,"attr_error":0,"max_blocks_per_sm":..,"wall_ns":..,
//    "values":{..}}     (regs/static_smem/local_bytes -1 where the driver did not say: attr_error its CUresult)
//   {"t":"error","call":"..","what":".."}   a CUPTI call failed; profiling of that launch is skipped
//   {"t":"end","profiled":N,"skipped":M}
//
// A metric that this GPU or CUPTI does not know is left out of the configuration (named in "refused")
// rather than failing the whole collection. Nothing here may take the host program down.

#include <cuda.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <cxxabi.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace {

std::mutex g_mu;  // one profiled launch at a time; guards everything below
FILE* g_out = nullptr;
pid_t g_pid = 0;
std::vector<std::string> g_metrics;         // requested and accepted
std::vector<std::string> g_refused;         // requested, not known here
std::vector<const char*> g_metric_ptrs;     // into g_metrics
std::string g_filter = "per-config";
std::vector<std::string> g_kernel_filters;
long g_max = 64;
long g_profiled = 0;
long g_skipped = 0;
long g_seq = 0;  // launches seen (every kernel launch, profiled or not)
std::string g_chip;
bool g_broken = false;  // a setup step failed: profile nothing more

std::vector<uint8_t> g_config;
CUpti_Profiler_Host_Object* g_host = nullptr;
std::unordered_map<CUcontext, CUpti_RangeProfiler_Object*> g_objects;
std::set<std::tuple<std::string, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned>> g_seen;
thread_local bool t_active = false;  // this thread started a range for the launch in flight
thread_local CUcontext t_ctx = nullptr;
thread_local std::chrono::steady_clock::time_point t_start;

// The driver's entry points, looked up in the libcuda.so.1 the process already loaded (the library is not
// linked against libcuda, so it builds on machines without a driver).
struct Driver {
    decltype(&cuCtxGetDevice) ctx_get_device = nullptr;
    decltype(&cuDeviceGetAttribute) device_get_attribute = nullptr;
    decltype(&cuDeviceGetName) device_get_name = nullptr;
    decltype(&cuFuncGetAttribute) func_get_attribute = nullptr;
    decltype(&cuKernelGetAttribute) kernel_get_attribute = nullptr;  // may be absent (older drivers)
    decltype(&cuOccupancyMaxActiveBlocksPerMultiprocessor) occupancy = nullptr;
    bool load() {
        void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        if (h == nullptr) h = dlopen("libcuda.so.1", RTLD_LAZY);
        if (h == nullptr) return false;
        ctx_get_device = reinterpret_cast<decltype(ctx_get_device)>(dlsym(h, "cuCtxGetDevice"));
        device_get_attribute = reinterpret_cast<decltype(device_get_attribute)>(dlsym(h, "cuDeviceGetAttribute"));
        device_get_name = reinterpret_cast<decltype(device_get_name)>(dlsym(h, "cuDeviceGetName"));
        func_get_attribute = reinterpret_cast<decltype(func_get_attribute)>(dlsym(h, "cuFuncGetAttribute"));
        kernel_get_attribute = reinterpret_cast<decltype(kernel_get_attribute)>(dlsym(h, "cuKernelGetAttribute"));
        occupancy = reinterpret_cast<decltype(occupancy)>(dlsym(h, "cuOccupancyMaxActiveBlocksPerMultiprocessor"));
        return ctx_get_device && device_get_attribute && device_get_name && func_get_attribute && occupancy;
    }
} g_cu;

// ---- output -------------------------------------------------------------------------------------------

void json_string(std::string& out, const char* s) {
    out += '"';
    for (const unsigned char* p = reinterpret_cast<const unsigned char*>(s); *p; ++p) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20 || c >= 0x7f) {  // names are ASCII; anything else is escaped byte-wise
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    out += '"';
}

void json_double(std::string& out, double v) {
    if (!std::isfinite(v)) {
        out += "null";
        return;
    }
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    out += buf;
}

void write_line(const std::string& line) {  // caller holds g_mu
    if (g_out == nullptr || getpid() != g_pid) return;  // never from a forked child
    std::fwrite(line.data(), 1, line.size(), g_out);
    std::fputc('\n', g_out);
    std::fflush(g_out);
}

bool ok(CUptiResult res, const char* call) {  // caller holds g_mu
    if (res == CUPTI_SUCCESS) return true;
    const char* text = nullptr;
    if (cuptiGetResultString(res, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
    std::string line = "{\"t\":\"error\",\"call\":";
    json_string(line, call);
    line += ",\"what\":";
    json_string(line, text);
    line += '}';
    write_line(line);
    std::fprintf(stderr, "kernelscope-metrics: %s: %s\n", call, text);
    return false;
}

std::vector<std::string> split(const char* s, char sep) {
    std::vector<std::string> out;
    if (s == nullptr) return out;
    std::string cur;
    for (const char* p = s; ; ++p) {
        if (*p == sep || *p == '\0') {
            size_t a = cur.find_first_not_of(" \t"), b = cur.find_last_not_of(" \t");
            if (a != std::string::npos) out.push_back(cur.substr(a, b - a + 1));
            cur.clear();
            if (*p == '\0') break;
        } else {
            cur += *p;
        }
    }
    return out;
}

std::string demangle(const char* mangled) {
    int status = 0;
    char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    std::string name = (status == 0 && d != nullptr) ? std::string(d) : std::string(mangled);
    std::free(d);
    return name;
}

// ---- configuration (host side: no GPU work) ---------------------------------------------------------

bool build_config(const std::vector<const char*>& names, std::vector<uint8_t>* image, size_t* passes) {
    CUpti_Profiler_Host_ConfigAddMetrics_Params add = {CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    add.pHostObject = g_host;
    add.ppMetricNames = const_cast<const char**>(names.data());
    add.numMetrics = names.size();
    if (cuptiProfilerHostConfigAddMetrics(&add) != CUPTI_SUCCESS) return false;
    CUpti_Profiler_Host_GetConfigImageSize_Params sz = {CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    sz.pHostObject = g_host;
    if (cuptiProfilerHostGetConfigImageSize(&sz) != CUPTI_SUCCESS) return false;
    image->assign(sz.configImageSize, 0);
    CUpti_Profiler_Host_GetConfigImage_Params get = {CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    get.pHostObject = g_host;
    get.configImageSize = image->size();
    get.pConfigImage = image->data();
    if (cuptiProfilerHostGetConfigImage(&get) != CUPTI_SUCCESS) return false;
    CUpti_Profiler_Host_GetNumOfPasses_Params np = {CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    np.pConfigImage = image->data();
    np.configImageSize = image->size();
    if (cuptiProfilerHostGetNumOfPasses(&np) != CUPTI_SUCCESS) return false;
    *passes = np.numOfPasses;
    return true;
}

bool new_host() {
    if (g_host != nullptr) {
        CUpti_Profiler_Host_Deinitialize_Params de = {CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
        de.pHostObject = g_host;
        cuptiProfilerHostDeinitialize(&de);
        g_host = nullptr;
    }
    CUpti_Profiler_Host_Initialize_Params hi = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    hi.pChipName = g_chip.c_str();
    hi.pCounterAvailabilityImage = nullptr;
    if (!ok(cuptiProfilerHostInitialize(&hi), "cuptiProfilerHostInitialize")) return false;
    g_host = hi.pHostObject;
    return true;
}

// The config image for the accepted metrics; unknown names are dropped one by one (so a typo or a
// metric this chip lacks costs that metric, not the collection).
bool configure(CUdevice dev, std::string* device_json) {
    CUpti_Device_GetChipName_Params chip = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    chip.deviceIndex = static_cast<size_t>(dev);
    if (!ok(cuptiDeviceGetChipName(&chip), "cuptiDeviceGetChipName")) return false;
    g_chip = chip.pChipName;
    if (!new_host()) return false;
    std::vector<std::string> wanted = g_metrics;
    g_metrics.clear();
    for (const auto& m : wanted) {  // each name alone first: which ones this chip knows
        std::vector<const char*> one = {m.c_str()};
        std::vector<uint8_t> img;
        size_t passes = 0;
        if (!new_host()) return false;
        if (build_config(one, &img, &passes)) g_metrics.push_back(m);
        else g_refused.push_back(m);
    }
    if (!new_host()) return false;
    g_metric_ptrs.clear();
    for (const auto& m : g_metrics) g_metric_ptrs.push_back(m.c_str());
    size_t passes = 0;
    if (!g_metrics.empty() && !build_config(g_metric_ptrs, &g_config, &passes)) {
        ok(CUPTI_ERROR_UNKNOWN, "cuptiProfilerHostGetConfigImage(all metrics)");
        return false;
    }
    auto attr = [&](CUdevice_attribute a) {
        int v = 0;
        g_cu.device_get_attribute(&v, a, dev);
        return v;
    };
    char name[256] = {0};
    g_cu.device_get_name(name, sizeof name - 1, dev);
    std::string d = "{\"name\":";
    json_string(d, name);
    const std::pair<const char*, CUdevice_attribute> attrs[] = {
        {"sm_count", CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
        {"cc_major", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
        {"cc_minor", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
        {"max_threads_per_sm", CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR},
        {"max_blocks_per_sm", CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR},
        {"regs_per_sm", CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR},
        {"smem_per_sm", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR},
        {"smem_per_block_optin", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN},
        {"reserved_smem_per_block", CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK},
        {"warp_size", CU_DEVICE_ATTRIBUTE_WARP_SIZE},
        {"l2_bytes", CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE},
    };
    for (const auto& a : attrs) d += std::string(",\"") + a.first + "\":" + std::to_string(attr(a.second));
    d += '}';
    *device_json = d;
    std::string line = "{\"t\":\"meta\",\"pid\":" + std::to_string(static_cast<long long>(getpid())) + ",\"chip\":";
    json_string(line, g_chip.c_str());
    line += ",\"metrics\":[";
    for (size_t i = 0; i < g_metrics.size(); ++i) {
        if (i) line += ',';
        json_string(line, g_metrics[i].c_str());
    }
    line += "],\"refused\":[";
    for (size_t i = 0; i < g_refused.size(); ++i) {
        if (i) line += ',';
        json_string(line, g_refused[i].c_str());
    }
    line += "],\"passes\":" + std::to_string(passes) + ",\"device\":" + d + '}';
    write_line(line);
    return !g_metrics.empty();
}

// ---- per context -----------------------------------------------------------------------------------

CUpti_RangeProfiler_Object* object_for(CUcontext ctx) {
    auto it = g_objects.find(ctx);
    if (it != g_objects.end()) return it->second;
    CUpti_RangeProfiler_Enable_Params en = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    en.ctx = ctx;
    if (!ok(cuptiRangeProfilerEnable(&en), "cuptiRangeProfilerEnable")) return nullptr;
    g_objects[ctx] = en.pRangeProfilerObject;
    return en.pRangeProfilerObject;
}

std::vector<uint8_t>& counter_data() {
    static std::vector<uint8_t>* data = new std::vector<uint8_t>;
    return *data;
}

bool arm(CUpti_RangeProfiler_Object* obj) {
    CUpti_RangeProfiler_GetCounterDataSize_Params sz = {CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    sz.pRangeProfilerObject = obj;
    sz.pMetricNames = g_metric_ptrs.data();
    sz.numMetrics = g_metric_ptrs.size();
    sz.maxNumOfRanges = 1;
    sz.maxNumRangeTreeNodes = 1;
    if (!ok(cuptiRangeProfilerGetCounterDataSize(&sz), "cuptiRangeProfilerGetCounterDataSize")) return false;
    auto& data = counter_data();
    data.assign(sz.counterDataSize, 0);
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params init = {
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    init.pRangeProfilerObject = obj;
    init.counterDataSize = data.size();
    init.pCounterData = data.data();
    if (!ok(cuptiRangeProfilerCounterDataImageInitialize(&init), "cuptiRangeProfilerCounterDataImageInitialize"))
        return false;
    CUpti_RangeProfiler_SetConfig_Params cfg = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
    cfg.pRangeProfilerObject = obj;
    cfg.configSize = g_config.size();
    cfg.pConfig = g_config.data();
    cfg.counterDataImageSize = data.size();
    cfg.pCounterDataImage = data.data();
    cfg.range = CUPTI_AutoRange;
    cfg.replayMode = CUPTI_KernelReplay;
    cfg.maxRangesPerPass = 1;
    cfg.numNestingLevels = 1;
    cfg.minNestingLevel = 1;
    cfg.passIndex = 0;
    cfg.targetNestingLevel = 0;
    if (!ok(cuptiRangeProfilerSetConfig(&cfg), "cuptiRangeProfilerSetConfig")) return false;
    CUpti_RangeProfiler_Start_Params st = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
    st.pRangeProfilerObject = obj;
    return ok(cuptiRangeProfilerStart(&st), "cuptiRangeProfilerStart");
}

// ---- the launch callbacks ---------------------------------------------------------------------------

struct Launch {
    CUfunction f = nullptr;
    unsigned grid[3] = {0, 0, 0};
    unsigned block[3] = {0, 0, 0};
    unsigned dyn_smem = 0;
};

bool read_launch(CUpti_CallbackId cbid, const void* params, Launch* l) {
    switch (cbid) {
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: {
            // cuLaunchCooperativeKernel's parameters start with the same fields as cuLaunchKernel's
            const auto* p = static_cast<const cuLaunchKernel_params*>(params);
            *l = Launch{p->f, {p->gridDimX, p->gridDimY, p->gridDimZ}, {p->blockDimX, p->blockDimY, p->blockDimZ},
                        p->sharedMemBytes};
            return true;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
            const auto* p = static_cast<const cuLaunchKernelEx_params*>(params);
            if (p->config == nullptr) return false;
            const CUlaunchConfig* c = p->config;
            *l = Launch{p->f, {c->gridDimX, c->gridDimY, c->gridDimZ}, {c->blockDimX, c->blockDimY, c->blockDimZ},
                        c->sharedMemBytes};
            return true;
        }
        default:
            return false;
    }
}

bool wanted(const char* mangled, const Launch& l) {
    if (!g_kernel_filters.empty()) {
        std::string dem = demangle(mangled);
        bool hit = false;
        for (const auto& f : g_kernel_filters)
            if (std::strstr(mangled, f.c_str()) != nullptr || dem.find(f) != std::string::npos) hit = true;
        if (!hit) return false;
    }
    if (g_filter == "all") return true;
    auto key = g_filter == "per-kernel"
                   ? std::make_tuple(std::string(mangled), 0u, 0u, 0u, 0u, 0u, 0u, 0u)
                   : std::make_tuple(std::string(mangled), l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1],
                                     l.block[2], l.dyn_smem);
    return g_seen.insert(key).second;
}

void finish(const CUpti_CallbackData* info, const Launch& l) {  // caller holds g_mu, t_active
    CUpti_RangeProfiler_Object* obj = g_objects[t_ctx];
    CUpti_RangeProfiler_Stop_Params sp = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
    sp.pRangeProfilerObject = obj;
    bool stopped = ok(cuptiRangeProfilerStop(&sp), "cuptiRangeProfilerStop");
    double wall_ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t_start).count();
    if (!stopped) return;
    if (!sp.isAllPassSubmitted) {  // kernel replay submits every pass inside the launch; anything else is a bug
        ok(CUPTI_ERROR_UNKNOWN, "cuptiRangeProfilerStop(not all passes submitted)");
        g_skipped++;
        return;
    }
    CUpti_RangeProfiler_DecodeData_Params dd = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
    dd.pRangeProfilerObject = obj;
    if (!ok(cuptiRangeProfilerDecodeData(&dd), "cuptiRangeProfilerDecodeData")) return;
    auto& data = counter_data();
    CUpti_RangeProfiler_GetCounterDataInfo_Params ci = {CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
    ci.pCounterDataImage = data.data();
    ci.counterDataImageSize = data.size();
    if (!ok(cuptiRangeProfilerGetCounterDataInfo(&ci), "cuptiRangeProfilerGetCounterDataInfo")) return;
    if (ci.numTotalRanges < 1) {
        ok(CUPTI_ERROR_UNKNOWN, "cuptiRangeProfilerDecodeData(no range recorded)");
        g_skipped++;
        return;
    }
    std::vector<double> values(g_metric_ptrs.size(), NAN);
    CUpti_Profiler_Host_EvaluateToGpuValues_Params ev = {CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
    ev.pHostObject = g_host;
    ev.pCounterDataImage = data.data();
    ev.counterDataImageSize = data.size();
    ev.rangeIndex = 0;
    ev.ppMetricNames = g_metric_ptrs.data();
    ev.numMetrics = g_metric_ptrs.size();
    ev.pMetricValues = values.data();
    if (!ok(cuptiProfilerHostEvaluateToGpuValues(&ev), "cuptiProfilerHostEvaluateToGpuValues")) return;

    // the runtime may launch a library kernel (CUkernel) through cuLaunchKernel, whose handle
    // cuFuncGetAttribute refuses: then ask cuKernelGetAttribute; -1 (and the driver's error) when neither answers
    CUdevice dev = 0;
    g_cu.ctx_get_device(&dev);
    int attr_error = 0;
    auto fattr = [&](CUfunction_attribute a) {
        int v = -1;
        if (l.f == nullptr) return v;
        CUresult r = g_cu.func_get_attribute(&v, a, l.f);
        if (r != CUDA_SUCCESS && g_cu.kernel_get_attribute != nullptr)
            r = g_cu.kernel_get_attribute(&v, a, reinterpret_cast<CUkernel>(l.f), dev);
        if (r != CUDA_SUCCESS) {
            attr_error = static_cast<int>(r);
            v = -1;
        }
        return v;
    };
    int blocks = -1;
    unsigned threads = l.block[0] * l.block[1] * l.block[2];
    if (l.f != nullptr) g_cu.occupancy(&blocks, l.f, static_cast<int>(threads), l.dyn_smem);
    const int regs = fattr(CU_FUNC_ATTRIBUTE_NUM_REGS);
    const int static_smem = fattr(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
    const int local_bytes = fattr(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
    const char* mangled = info->symbolName ? info->symbolName : "";
    std::string line = "{\"t\":\"launch\",\"seq\":" + std::to_string(g_seq) + ",\"name\":";
    json_string(line, mangled);
    line += ",\"demangled\":";
    json_string(line, demangle(mangled).c_str());
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"dyn_smem\":%u,\"regs\":%d,\"static_smem\":%d,"
                  "\"local_bytes\":%d,\"attr_error\":%d,\"max_blocks_per_sm\":%d,\"wall_ns\":%.0f,\"values\":{",
                  l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], l.dyn_smem, regs, static_smem,
                  local_bytes, attr_error, blocks, wall_ns);
    line += buf;
    for (size_t i = 0; i < values.size(); ++i) {
        if (i) line += ',';
        json_string(line, g_metric_ptrs[i]);
        line += ':';
        json_double(line, values[i]);
    }
    line += "}}";
    write_line(line);
    g_profiled++;
}

void CUPTIAPI on_launch(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
    const auto* info = static_cast<const CUpti_CallbackData*>(data);
    Launch l;
    if (info == nullptr || !read_launch(cbid, info->functionParams, &l)) return;
    if (info->callbackSite == CUPTI_API_ENTER) {
        g_mu.lock();  // held until API_EXIT of a profiled launch: one range at a time, whatever the thread
        g_seq++;
        t_active = false;
        if (g_broken || getpid() != g_pid || g_profiled + g_skipped >= g_max || info->symbolName == nullptr ||
            !wanted(info->symbolName, l)) {
            g_mu.unlock();
            return;
        }
        if (g_config.empty()) {  // first profiled launch: a context exists and the device is known now
            CUdevice dev = 0;
            std::string device;
            CUpti_Profiler_Initialize_Params pi = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
            if (!ok(cuptiProfilerInitialize(&pi), "cuptiProfilerInitialize") || !g_cu.load() || g_cu.ctx_get_device(&dev) != CUDA_SUCCESS || !configure(dev, &device)) {
                g_broken = true;
                g_mu.unlock();
                return;
            }
        }
        CUpti_RangeProfiler_Object* obj = object_for(info->context);
        if (obj == nullptr || !arm(obj)) {
            g_skipped++;
            g_mu.unlock();
            return;
        }
        t_active = true;
        t_ctx = info->context;
        t_start = std::chrono::steady_clock::now();
        return;  // g_mu stays held
    }
    if (!t_active) return;
    t_active = false;
    finish(info, l);
    g_mu.unlock();
}

void at_exit() {
    std::lock_guard<std::mutex> lock(g_mu);
    if (getpid() != g_pid || g_out == nullptr) return;
    for (auto& kv : g_objects) {
        CUpti_RangeProfiler_Disable_Params dp = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
        dp.pRangeProfilerObject = kv.second;
        cuptiRangeProfilerDisable(&dp);
    }
    g_objects.clear();
    std::string line = "{\"t\":\"end\",\"profiled\":" + std::to_string(g_profiled) +
                       ",\"skipped\":" + std::to_string(g_skipped) + ",\"launches\":" + std::to_string(g_seq) + '}';
    write_line(line);
    std::fclose(g_out);
    g_out = nullptr;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
    static std::atomic<bool> done{false};
    if (done.exchange(true)) return 1;
    const char* dir = std::getenv("KERNELSCOPE_METRICS_DIR");
    if (dir == nullptr || dir[0] == '\0') return 1;
    std::lock_guard<std::mutex> lock(g_mu);
    g_pid = getpid();
    std::string path = std::string(dir) + "/metrics-" + std::to_string(static_cast<long long>(g_pid)) + ".jsonl";
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 || (g_out = fdopen(fd, "a")) == nullptr) {
        std::fprintf(stderr, "kernelscope-metrics: open %s: %s\n", path.c_str(), std::strerror(errno));
        return 1;
    }
    g_metrics = split(std::getenv("KERNELSCOPE_METRICS"), ',');
    g_kernel_filters = split(std::getenv("KERNELSCOPE_METRICS_KERNELS"), '|');
    if (const char* f = std::getenv("KERNELSCOPE_METRICS_FILTER"); f != nullptr && f[0] != '\0') g_filter = f;
    if (const char* m = std::getenv("KERNELSCOPE_METRICS_MAX"); m != nullptr && m[0] != '\0') g_max = std::atol(m);
    if (g_metrics.empty()) {
        ok(CUPTI_ERROR_INVALID_PARAMETER, "KERNELSCOPE_METRICS is empty");
        return 1;
    }
    // cuptiProfilerInitialize waits for the first profiled launch: called here, during the driver's own
    // initialisation, it fails (CUPTI_ERROR_UNKNOWN on the H100 host, CUDA 13)
    CUpti_SubscriberHandle sub = nullptr;
    if (!ok(cuptiSubscribe(&sub, on_launch, nullptr), "cuptiSubscribe")) return 1;
    const CUpti_CallbackId ids[] = {
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz};
    for (auto id : ids) ok(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id), "cuptiEnableCallback");
    std::atexit(at_exit);
    return 1;
}
