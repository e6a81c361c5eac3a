// kernelscope in-process metric collector, loaded into a CUDA process through CUDA_INJECTION64_PATH.
//
// It collects hardware metrics (the same Perfworks metric names Nsight Compute uses) for selected kernel
// launches with CUPTI's Range Profiler: auto ranges, kernel replay, one launch per range. No separate
// profiler process: the program runs once, and each selected launch is replayed in place as many times
// as its metrics need passes. For the deep launches it also collects, per instruction, what Nsight
// Compute's source counters show: PC samples by warp stall reason (CUPTI's PC sampling API) and executed
// instructions, threads, global sectors and shared wavefronts with their ideal (CUPTI's SASS metrics API),
// each on its own run of the launch over a checkpoint of the context's memory (CUPTI's checkpoint API):
//
//   API_ENTER   save the memory; PC sampling of one run of the kernel (on a worker thread: CUPTI neither
//               samples nor patches a launch made from inside its callbacks); restore the memory
//   the launch  the range profiler's passes (kernel replay), as for every profiled launch
//   API_EXIT    save the memory as the launch left it; restore the saved one; the SASS metrics pass; restore
//               the memory as the launch left it
//
// The order is what works on the H100 (driver 580, CUDA 13): PC sampling after the range profiler's passes
// counted samples but handed over no PC records, and a SASS metric configuration set before them made the
// range profiler record no range.
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
//   KERNELSCOPE_METRICS_DEEP      further metric names for the deep launches (below): their launches are
//                                 profiled with KERNELSCOPE_METRICS and these together
//   KERNELSCOPE_DEEP_KERNELS      '|'-separated name substrings ("*": every kernel): the deep launches
//                                 (default: none)
//   KERNELSCOPE_DEEP_MAX          at most this many deep launches (default 16); later ones get the light metrics
//   KERNELSCOPE_SOURCE            "1" ("pc", "sass": only that pass): the per-instruction passes of the deep
//                                 launches (above): PC sampling of every stall reason and the SASS metrics in
//                                 KERNELSCOPE_SASS_METRICS (comma-separated), with each instruction's source
//                                 line where the cubin has line information
//   KERNELSCOPE_PCSAMP_PERIOD     PC sampling period as a power of two of cycles, 5..31 (default 9)
//   KERNELSCOPE_PCSAMP_BUFFER_MB  PC sampling's hardware buffer (default 64)
//   KERNELSCOPE_METRICS_GATED     "1": launches are counted and profiled only inside the process's profiler
//                                 range, between cuProfilerStart (or cudaProfilerStart, e.g.
//                                 torch.cuda.profiler.start()) and cuProfilerStop: the range opens when
//                                 the start call returns and closes when the stop call is entered. The
//                                 eval harness opens it around the candidate's profiled forward calls only,
//                                 as for ``ncu --profile-from-start off``. Unset: every launch
//
// Line formats:
//   {"t":"meta","pid":..,"chip":"GH100","metrics":[..],"deep_metrics":[..],"sass_metrics":[..],
//    "sass_catalogue":[..],"refused":[..],"passes":N,"deep_passes":M,"device":{..}}
//   {"t":"launch","seq":..,"name":"<mangled>","demangled":"..","grid":[x,y,z],"block":[x,y,z],"dyn_smem":..,
//    "regs":..,"static_smem":..,"local_bytes":..,"attr_error":0,"max_blocks_per_sm":..,"wall_ns":..,
//    "deep":b,"values":{..}}   (regs/static_smem/local_bytes -1 where the driver did not say: attr_error its
//                               CUresult)
//   {"t":"source","seq":..,"name":"<mangled>","period":P,"sampled":b,"counted":b,"samples":N,"dropped":M,
//    "wall_ns":..,"reasons":[..],
//    "sass_metrics":[..],"cubin":"cubin-<crc>.cubin",
//    "pcs":[{"pc":off,"file":"..","line":L,"stall":[..per reason..],"sass":[..]},..]}
//                       (per instruction of the deep launch; "file" is "" and "line" 0 without line info;
//                        "cubin": the module the kernel ran from, as the driver loaded it, written once into
//                        KERNELSCOPE_METRICS_DIR, so the PC offsets can be read against its SASS; "" where it
//                        was not seen or could not be written)
//   {"t":"error","call":"..","what":".."}   a CUPTI call failed; profiling of that launch is skipped
//   {"t":"end","profiled":N,"skipped":M,"launches":L,"configs":[{"name":..,"grid":[..],"block":[..],
//    "dyn_smem":..,"launches":n},..],"configs_capped":false,"gated":b,"gate_opened":K}
//                       (launches per kernel and configuration; "gated": KERNELSCOPE_METRICS_GATED was set,
//                        "gate_opened": how many times the profiler range opened)
//
// A metric that this GPU or CUPTI does not know is left out of the configuration (named in "refused")
// rather than failing the whole collection. Nothing here may take the host program down.

#include <cuda.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <cupti_checkpoint.h>
#include <cupti_pcsampling.h>
#include <cupti_sass_metrics.h>

using NV::Cupti::Checkpoint::CUpti_Checkpoint;

#include <cxxabi.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace {

std::mutex g_mu;  // one profiled launch at a time; guards everything below
FILE* g_out = nullptr;
pid_t g_pid = 0;
std::string g_dir;  // KERNELSCOPE_METRICS_DIR
// A metric configuration: the accepted names, the config image the range profiler runs, its passes, and
// the host object that evaluates its counter data.
struct MetricSet {
    std::vector<std::string> names;
    std::vector<const char*> ptrs;  // into names
    std::vector<uint8_t> config;
    size_t passes = 0;
    CUpti_Profiler_Host_Object* host = nullptr;
};
std::vector<std::string> g_wanted;       // KERNELSCOPE_METRICS
std::vector<std::string> g_wanted_deep;  // KERNELSCOPE_METRICS_DEEP
std::vector<std::string> g_refused;      // requested, not known here
MetricSet g_light;                       // every profiled launch
MetricSet g_deep;                        // the deep launches: g_light's names and the deep ones
std::string g_filter = "per-config";
std::vector<std::string> g_kernel_filters;
std::vector<std::string> g_deep_kernels;
bool g_source = false;                   // per-instruction passes (PC sampling, SASS metrics) for deep launches
bool g_source_pc = true, g_source_sass = true;  // which of the two

unsigned g_pcsamp_period = 9;
size_t g_pc_hw_buffer = size_t(64) << 20;  // PC sampling's hardware buffer (KERNELSCOPE_PCSAMP_BUFFER_MB)
std::vector<std::string> g_sass_wanted;  // KERNELSCOPE_SASS_METRICS
long g_max = 64;
long g_deep_max = 16;   // deep launches at most (KERNELSCOPE_DEEP_MAX); later ones get the light metrics
long g_deep_count = 0;
long g_profiled = 0;
long g_skipped = 0;
long g_seq = 0;  // launches seen (every kernel launch, profiled or not)
std::string g_chip;
bool g_configured = false;
bool g_gated = false;                     // KERNELSCOPE_METRICS_GATED: only launches inside the profiler range
std::atomic<bool> g_gate_open{false};     // the range is open (read without g_mu, on every launch)
std::atomic<long> g_gate_opened{0};       // times it opened
bool g_broken = false;  // a setup step failed: profile nothing more

std::unordered_map<CUcontext, CUpti_RangeProfiler_Object*> g_objects;
using ConfigKey = std::tuple<std::string, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned>;
std::set<ConfigKey> g_seen;
std::map<ConfigKey, long> g_counts;  // launches per kernel and launch configuration (every launch, profiled or not)
const size_t MAX_COUNTED = 4096;      // configurations counted at most (shapes that change every launch)
thread_local bool t_active = false;  // this thread started a range for the launch in flight
thread_local bool t_inner = false;   // this thread is relaunching a kernel for the source passes
thread_local MetricSet* t_set = nullptr;
thread_local bool t_source = false;  // the launch in flight gets the source passes at its API_EXIT
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
    // for the source passes' own launches (absent ones turn the source passes off, nothing else)
    decltype(&cuLaunchKernel) launch_kernel = nullptr;
    decltype(&cuLaunchKernel) launch_kernel_ptsz = nullptr;
    decltype(&cuLaunchCooperativeKernel) launch_cooperative = nullptr;
    decltype(&cuLaunchCooperativeKernel) launch_cooperative_ptsz = nullptr;
    decltype(&cuLaunchKernelEx) launch_ex = nullptr;
    decltype(&cuLaunchKernelEx) launch_ex_ptsz = nullptr;
    CUresult (*ctx_synchronize)() = nullptr;
    decltype(&cuCtxSetCurrent) ctx_set_current = nullptr;
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
        launch_kernel = reinterpret_cast<decltype(launch_kernel)>(dlsym(h, "cuLaunchKernel"));
        launch_kernel_ptsz = reinterpret_cast<decltype(launch_kernel_ptsz)>(dlsym(h, "cuLaunchKernel_ptsz"));
        launch_cooperative = reinterpret_cast<decltype(launch_cooperative)>(dlsym(h, "cuLaunchCooperativeKernel"));
        launch_cooperative_ptsz =
            reinterpret_cast<decltype(launch_cooperative_ptsz)>(dlsym(h, "cuLaunchCooperativeKernel_ptsz"));
        launch_ex = reinterpret_cast<decltype(launch_ex)>(dlsym(h, "cuLaunchKernelEx"));
        launch_ex_ptsz = reinterpret_cast<decltype(launch_ex_ptsz)>(dlsym(h, "cuLaunchKernelEx_ptsz"));
        ctx_synchronize = reinterpret_cast<decltype(ctx_synchronize)>(dlsym(h, "cuCtxSynchronize"));
        ctx_set_current = reinterpret_cast<decltype(ctx_set_current)>(dlsym(h, "cuCtxSetCurrent"));
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

CUpti_Profiler_Host_Object* new_host() {
    CUpti_Profiler_Host_Initialize_Params hi = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    hi.pChipName = g_chip.c_str();
    hi.pCounterAvailabilityImage = nullptr;
    if (!ok(cuptiProfilerHostInitialize(&hi), "cuptiProfilerHostInitialize")) return nullptr;
    return hi.pHostObject;
}

void free_host(CUpti_Profiler_Host_Object* host) {
    if (host == nullptr) return;
    CUpti_Profiler_Host_Deinitialize_Params de = {CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    de.pHostObject = host;
    cuptiProfilerHostDeinitialize(&de);
}

// A config image for these names on a fresh host object, which is kept (in *host) when the build succeeds.
bool build_config(const std::vector<std::string>& names, MetricSet* out) {
    CUpti_Profiler_Host_Object* host = new_host();
    if (host == nullptr) return false;
    std::vector<const char*> ptrs;
    for (const auto& n : names) ptrs.push_back(n.c_str());
    CUpti_Profiler_Host_ConfigAddMetrics_Params add = {CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    add.pHostObject = host;
    add.ppMetricNames = ptrs.data();
    add.numMetrics = ptrs.size();
    CUpti_Profiler_Host_GetConfigImageSize_Params sz = {CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    sz.pHostObject = host;
    std::vector<uint8_t> image;
    bool good = cuptiProfilerHostConfigAddMetrics(&add) == CUPTI_SUCCESS &&
                cuptiProfilerHostGetConfigImageSize(&sz) == CUPTI_SUCCESS;
    if (good) {
        image.assign(sz.configImageSize, 0);
        CUpti_Profiler_Host_GetConfigImage_Params get = {CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
        get.pHostObject = host;
        get.configImageSize = image.size();
        get.pConfigImage = image.data();
        good = cuptiProfilerHostGetConfigImage(&get) == CUPTI_SUCCESS;
    }
    CUpti_Profiler_Host_GetNumOfPasses_Params np = {CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    if (good) {
        np.pConfigImage = image.data();
        np.configImageSize = image.size();
        good = cuptiProfilerHostGetNumOfPasses(&np) == CUPTI_SUCCESS;
    }
    if (!good) {
        free_host(host);
        return false;
    }
    free_host(out->host);
    out->host = host;
    out->names = names;
    out->ptrs.clear();
    for (const auto& n : out->names) out->ptrs.push_back(n.c_str());
    out->config = std::move(image);
    out->passes = np.numOfPasses;
    return true;
}

// The accepted subset of these names: all of them when the whole list builds, else each name alone (so a
// typo or a metric this chip lacks costs that metric, not the collection).
std::vector<std::string> accepted(const std::vector<std::string>& wanted) {
    MetricSet probe;
    if (wanted.empty() || build_config(wanted, &probe)) {
        free_host(probe.host);
        return wanted;
    }
    std::vector<std::string> out;
    for (const auto& m : wanted) {
        MetricSet one;
        if (build_config({m}, &one)) out.push_back(m);
        else g_refused.push_back(m);
        free_host(one.host);
    }
    return out;
}

void json_names(std::string& line, const std::vector<std::string>& names) {
    line += '[';
    for (size_t i = 0; i < names.size(); ++i) {
        if (i) line += ',';
        json_string(line, names[i].c_str());
    }
    line += ']';
}

// ---- per-instruction collection: SASS metrics' catalogue (host side) --------------------------------

struct SassSetup {
    std::vector<std::string> names;  // wanted and known here, in configuration order
    std::vector<uint64_t> ids;
    bool configured = false;  // names and ids known; the device's configuration is set for each pass
    uint32_t device = 0;
};
SassSetup g_sass;

std::vector<std::string> g_sass_catalogue;  // every SASS metric this chip offers (written in the meta line)

void sass_catalogue(CUdevice dev) {  // caller holds g_mu; the names this chip offers, for the ones asked
    CUpti_SassMetrics_GetNumOfMetrics_Params nm = {CUpti_SassMetrics_GetNumOfMetrics_Params_STRUCT_SIZE};
    nm.pChipName = g_chip.c_str();
    if (cuptiSassMetricsGetNumOfMetrics(&nm) == CUPTI_SUCCESS && nm.numOfMetrics > 0) {
        std::vector<CUpti_SassMetrics_MetricDetails> all(nm.numOfMetrics);
        CUpti_SassMetrics_GetMetrics_Params gm = {CUpti_SassMetrics_GetMetrics_Params_STRUCT_SIZE};
        gm.pChipName = g_chip.c_str();
        gm.numOfMetrics = all.size();
        gm.pMetricsList = all.data();
        if (cuptiSassMetricsGetMetrics(&gm) == CUPTI_SUCCESS)
            for (const auto& m : all)
                if (m.pMetricName) g_sass_catalogue.emplace_back(m.pMetricName);
    }
    for (const auto& m : g_sass_wanted) {
        CUpti_SassMetrics_GetProperties_Params pp = {CUpti_SassMetrics_GetProperties_Params_STRUCT_SIZE};
        pp.pChipName = g_chip.c_str();
        pp.pMetricName = m.c_str();
        if (cuptiSassMetricsGetProperties(&pp) == CUPTI_SUCCESS) {
            g_sass.names.push_back(m);
            g_sass.ids.push_back(pp.metric.metricId);
        } else {
            g_refused.push_back(m);
        }
    }
    g_sass.configured = !g_sass.names.empty();
    g_sass.device = static_cast<uint32_t>(dev);
}

// The metric sets for the accepted metrics, the device's attributes, and the meta line.
bool configure(CUdevice dev) {
    CUpti_Device_GetChipName_Params chip = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    chip.deviceIndex = static_cast<size_t>(dev);
    if (!ok(cuptiDeviceGetChipName(&chip), "cuptiDeviceGetChipName")) return false;
    g_chip = chip.pChipName;
    std::vector<std::string> light = accepted(g_wanted);
    if (!light.empty() && !build_config(light, &g_light)) {
        ok(CUPTI_ERROR_UNKNOWN, "cuptiProfilerHostGetConfigImage(all metrics)");
        return false;
    }
    std::vector<std::string> extra;
    for (const auto& m : g_wanted_deep)
        if (std::find(light.begin(), light.end(), m) == light.end() &&
            std::find(extra.begin(), extra.end(), m) == extra.end())
            extra.push_back(m);
    extra = accepted(extra);
    std::vector<std::string> deep = light;
    deep.insert(deep.end(), extra.begin(), extra.end());
    if (!g_deep_kernels.empty() && !deep.empty() && !build_config(deep, &g_deep)) {
        ok(CUPTI_ERROR_UNKNOWN, "cuptiProfilerHostGetConfigImage(deep metrics)");
        g_deep_kernels.clear();
    }
    if (g_source && !g_deep_kernels.empty()) sass_catalogue(dev);
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
        {"regs_per_block", CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK},
        {"smem_per_sm", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR},
        {"smem_per_block_optin", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN},
        {"reserved_smem_per_block", CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK},
        {"warp_size", CU_DEVICE_ATTRIBUTE_WARP_SIZE},
        {"l2_bytes", CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE},
    };
    for (const auto& a : attrs) d += std::string(",\"") + a.first + "\":" + std::to_string(attr(a.second));
    d += '}';
    std::string line = "{\"t\":\"meta\",\"pid\":" + std::to_string(static_cast<long long>(getpid())) + ",\"chip\":";
    json_string(line, g_chip.c_str());
    line += ",\"metrics\":";
    json_names(line, g_light.names);
    line += ",\"deep_metrics\":";
    json_names(line, extra);
    line += ",\"sass_metrics\":";
    json_names(line, g_sass.configured ? g_sass.names : std::vector<std::string>{});
    line += ",\"sass_catalogue\":";
    json_names(line, g_sass_catalogue);
    line += ",\"refused\":";
    json_names(line, g_refused);
    line += ",\"passes\":" + std::to_string(g_light.passes) + ",\"deep_passes\":" + std::to_string(g_deep.passes) +
            ",\"device\":" + d + '}';
    write_line(line);
    return !g_light.names.empty();
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

void drop_object(CUcontext ctx) {  // the range profiler off on this context (enabled again at its next launch)
    auto it = g_objects.find(ctx);
    if (it == g_objects.end()) return;
    CUpti_RangeProfiler_Disable_Params dp = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
    dp.pRangeProfilerObject = it->second;
    ok(cuptiRangeProfilerDisable(&dp), "cuptiRangeProfilerDisable");
    g_objects.erase(it);
}

bool arm(CUpti_RangeProfiler_Object* obj, const MetricSet& set) {
    CUpti_RangeProfiler_GetCounterDataSize_Params sz = {CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    sz.pRangeProfilerObject = obj;
    sz.pMetricNames = const_cast<const char**>(set.ptrs.data());
    sz.numMetrics = set.ptrs.size();
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
    cfg.configSize = set.config.size();
    cfg.pConfig = set.config.data();
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
    CUpti_CallbackId cbid = 0;
    const void* params = nullptr;  // the intercepted call's parameters, alive until its API_EXIT
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
                        p->sharedMemBytes, cbid, params};
            return true;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
            const auto* p = static_cast<const cuLaunchKernelEx_params*>(params);
            if (p->config == nullptr) return false;
            const CUlaunchConfig* c = p->config;
            *l = Launch{p->f, {c->gridDimX, c->gridDimY, c->gridDimZ}, {c->blockDimX, c->blockDimY, c->blockDimZ},
                        c->sharedMemBytes, cbid, params};
            return true;
        }
        default:
            return false;
    }
}

ConfigKey config_key(const char* mangled, const Launch& l) {  // the kernel and its launch configuration
    return std::make_tuple(std::string(mangled), l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2],
                           l.dyn_smem);
}

// Whether the mangled or demangled name contains one of these substrings.
bool contains_any(const char* mangled, const std::vector<std::string>& subs) {
    std::string dem = demangle(mangled);
    for (const auto& f : subs)
        if (std::strstr(mangled, f.c_str()) != nullptr || dem.find(f) != std::string::npos) return true;
    return false;
}

void count(const char* mangled, const Launch& l) {  // caller holds g_mu
    ConfigKey key = config_key(mangled, l);
    auto it = g_counts.find(key);
    if (it != g_counts.end()) it->second++;
    else if (g_counts.size() < MAX_COUNTED) g_counts.emplace(key, 1);
}

bool wanted(const char* mangled, const Launch& l) {
    if (!g_kernel_filters.empty() && !contains_any(mangled, g_kernel_filters)) return false;
    if (g_filter == "all") return true;
    auto key = g_filter == "per-kernel" ? std::make_tuple(std::string(mangled), 0u, 0u, 0u, 0u, 0u, 0u, 0u)
                                        : config_key(mangled, l);
    return g_seen.insert(key).second;
}

// ---- per-instruction collection: the source passes -------------------------------------------------

// Cubins as the driver loaded them (resource callback), by CUPTI's CRC: the line information of a PC.
std::mutex g_cubin_mu;  // guards g_cubins: modules may load inside a launch, while g_mu is held
std::map<uint64_t, std::vector<char>> g_cubins;
std::map<std::tuple<uint64_t, std::string, uint64_t>, std::pair<std::string, uint32_t>> g_line_cache;

void on_module(const CUpti_ResourceData* rd) {
    const auto* mod = static_cast<const CUpti_ModuleResourceData*>(rd->resourceDescriptor);
    if (mod == nullptr || mod->pCubin == nullptr || mod->cubinSize == 0) return;
    CUpti_GetCubinCrcParams crc = {CUpti_GetCubinCrcParamsSize};
    crc.cubin = mod->pCubin;
    crc.cubinSize = mod->cubinSize;
    if (cuptiGetCubinCrc(&crc) != CUPTI_SUCCESS) return;
    std::lock_guard<std::mutex> lock(g_cubin_mu);
    if (g_cubins.count(crc.cubinCrc) == 0) g_cubins[crc.cubinCrc].assign(mod->pCubin, mod->pCubin + mod->cubinSize);
}

// The loaded cubin a record's CRC names (caller holds g_cubin_mu); SASS metrics give a 32-bit CRC: the cubin
// whose CRC it truncates.
std::map<uint64_t, std::vector<char>>::iterator find_cubin(uint64_t crc) {
    auto cubin = g_cubins.find(crc);
    if (cubin == g_cubins.end()) {
        for (auto it = g_cubins.begin(); it != g_cubins.end(); ++it)
            if (static_cast<uint32_t>(it->first) == static_cast<uint32_t>(crc)) cubin = it;
    }
    return cubin;
}

// The cubin a deep launch ran from, written once into the output folder as cubin-<crc>.cubin (a new file:
// never through a link, never over another file); its name, or "" (caller holds g_mu).
constexpr size_t CUBIN_MAX_BYTES = size_t(64) << 20;
std::map<uint64_t, std::string> g_cubin_files;

std::string save_cubin(uint64_t crc) {
    if (crc == 0 || g_dir.empty() || getpid() != g_pid) return "";
    std::lock_guard<std::mutex> lock(g_cubin_mu);
    auto cubin = find_cubin(crc);
    if (cubin == g_cubins.end() || cubin->second.size() > CUBIN_MAX_BYTES) return "";
    auto done = g_cubin_files.find(cubin->first);
    if (done != g_cubin_files.end()) return done->second;
    char name[64];
    std::snprintf(name, sizeof name, "cubin-%016" PRIx64 ".cubin", cubin->first);
    std::string path = g_dir + "/" + name;
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    bool good = fd >= 0;
    for (size_t off = 0; good && off < cubin->second.size();) {
        ssize_t n = write(fd, cubin->second.data() + off, cubin->second.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) good = false;
        else off += static_cast<size_t>(n);
    }
    if (fd >= 0) close(fd);
    if (!good) {
        if (fd >= 0) unlink(path.c_str());
        ok(CUPTI_ERROR_UNKNOWN, "source passes: the kernel's cubin could not be written");
        name[0] = '\0';
    }
    return g_cubin_files[cubin->first] = name;
}

std::pair<std::string, uint32_t> source_of(uint64_t crc, const char* function, uint64_t pc) {  // holds g_mu
    if (function == nullptr) return {"", 0};
    auto key = std::make_tuple(crc, std::string(function), pc);
    auto hit = g_line_cache.find(key);
    if (hit != g_line_cache.end()) return hit->second;
    std::pair<std::string, uint32_t> out{"", 0};
    std::lock_guard<std::mutex> lock(g_cubin_mu);
    auto cubin = find_cubin(crc);
    if (cubin != g_cubins.end()) {
        CUpti_GetSassToSourceCorrelationParams sp = {CUpti_GetSassToSourceCorrelationParamsSize};
        sp.cubin = cubin->second.data();
        sp.cubinSize = cubin->second.size();
        sp.functionName = function;
        sp.pcOffset = pc;
        if (cuptiGetSassToSourceCorrelation(&sp) == CUPTI_SUCCESS) {
            std::string file = sp.fileName ? sp.fileName : "";
            if (sp.dirName && sp.dirName[0] && !file.empty() && file[0] != '/') file = std::string(sp.dirName) + "/" + file;
            out = {file, sp.lineNumber};
        }
        std::free(sp.fileName);
        std::free(sp.dirName);
    }
    g_line_cache[key] = out;
    return out;
}

// CUPTI's checkpoint API lives in its own library (libcheckpoint.so, next to libcupti): looked up when first
// needed, so that the collector loads (and its metric passes work) where it is missing.
struct CheckpointApi {
    using Fn = CUptiResult (*)(CUpti_Checkpoint*);
    Fn save = nullptr, restore = nullptr, release = nullptr;
    bool tried = false;
    bool load() {
        if (tried) return save && restore && release;
        tried = true;
        std::vector<std::string> paths;
        Dl_info info;
        if (dladdr(reinterpret_cast<void*>(&cuptiGetResultString), &info) != 0 && info.dli_fname != nullptr) {
            std::string lib = info.dli_fname;
            size_t slash = lib.rfind('/');
            if (slash != std::string::npos) paths.push_back(lib.substr(0, slash + 1) + "libcheckpoint.so");
        }
        paths.push_back("libcheckpoint.so");
        void* h = nullptr;
        for (const auto& p : paths)
            if ((h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
        if (h == nullptr) return false;
        save = reinterpret_cast<Fn>(dlsym(h, "cuptiCheckpointSave"));
        restore = reinterpret_cast<Fn>(dlsym(h, "cuptiCheckpointRestore"));
        release = reinterpret_cast<Fn>(dlsym(h, "cuptiCheckpointFree"));
        return save && restore && release;
    }
} g_checkpoint;

// Launch the intercepted kernel once more, as it was launched (its parameters are alive during API_ENTER),
// and wait for it. Our own launch does not reach on_launch's profiling (t_inner).
CUresult relaunch_here(const Launch& l) {
    CUresult r = CUDA_ERROR_NOT_SUPPORTED;
    t_inner = true;
    switch (l.cbid) {
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
            const auto* p = static_cast<const cuLaunchKernel_params*>(l.params);
            auto fn = l.cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel ? g_cu.launch_kernel : g_cu.launch_kernel_ptsz;
            if (fn)
                r = fn(p->f, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ,
                       p->sharedMemBytes, p->hStream, p->kernelParams, p->extra);
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: {
            const auto* p = static_cast<const cuLaunchCooperativeKernel_params*>(l.params);
            auto fn = l.cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel ? g_cu.launch_cooperative
                                                                                   : g_cu.launch_cooperative_ptsz;
            if (fn)
                r = fn(p->f, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ,
                       p->sharedMemBytes, p->hStream, p->kernelParams);
            break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
            const auto* p = static_cast<const cuLaunchKernelEx_params*>(l.params);
            auto fn = l.cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx ? g_cu.launch_ex : g_cu.launch_ex_ptsz;
            if (fn) r = fn(p->config, p->f, p->kernelParams, p->extra);
            break;
        }
        default:
            break;
    }
    if (r == CUDA_SUCCESS && g_cu.ctx_synchronize) r = g_cu.ctx_synchronize();
    t_inner = false;
    return r;
}

struct PcRecord {
    std::vector<uint64_t> stall;  // samples per reason (g_reason_names' order)
    std::vector<uint64_t> sass;   // per g_sass.names
    std::string function;
    uint64_t crc = 0;
};

std::vector<std::string> g_reason_names;  // index in CUPTI's list -> name
std::vector<uint32_t> g_reason_index;

// PC sampling of one run of the launch: samples per PC and stall reason, into recs. The checkpoint restores
// memory afterwards (the caller's).
bool pc_sampling_pass(CUcontext ctx, const Launch& l, std::map<uint64_t, PcRecord>* recs, uint64_t* total,
                      uint64_t* dropped) {
    CUpti_PCSamplingEnableParams en = {CUpti_PCSamplingEnableParamsSize};
    en.ctx = ctx;
    if (!ok(cuptiPCSamplingEnable(&en), "cuptiPCSamplingEnable")) return false;
    bool good = true;
    if (g_reason_names.empty()) {
        size_t n = 0;
        CUpti_PCSamplingGetNumStallReasonsParams nr = {CUpti_PCSamplingGetNumStallReasonsParamsSize};
        nr.ctx = ctx;
        nr.numStallReasons = &n;
        good = ok(cuptiPCSamplingGetNumStallReasons(&nr), "cuptiPCSamplingGetNumStallReasons") && n > 0;
        if (good) {
            std::vector<char*> names(n);
            for (auto& p : names) p = static_cast<char*>(std::calloc(CUPTI_STALL_REASON_STRING_SIZE, 1));
            g_reason_index.assign(n, 0);
            CUpti_PCSamplingGetStallReasonsParams sr = {CUpti_PCSamplingGetStallReasonsParamsSize};
            sr.ctx = ctx;
            sr.numStallReasons = n;
            sr.stallReasonIndex = g_reason_index.data();
            sr.stallReasons = names.data();
            good = ok(cuptiPCSamplingGetStallReasons(&sr), "cuptiPCSamplingGetStallReasons");
            for (auto* p : names) {
                if (good) g_reason_names.emplace_back(p);
                std::free(p);
            }
            if (!good) g_reason_index.clear();
        }
    }
    const size_t reasons = g_reason_names.size();
    const size_t max_pcs = 20000;
    std::vector<CUpti_PCSamplingPCData> pcs(max_pcs);
    std::vector<CUpti_PCSamplingStallReason> slots(max_pcs * (reasons ? reasons : 1));
    for (size_t i = 0; i < max_pcs; ++i) {
        pcs[i].size = sizeof(CUpti_PCSamplingPCData);
        pcs[i].stallReason = &slots[i * (reasons ? reasons : 1)];
    }
    CUpti_PCSamplingData data = {};
    data.size = sizeof(CUpti_PCSamplingData);
    data.collectNumPcs = max_pcs;
    data.pPcData = pcs.data();
    if (good) {  // one call with every attribute (each one's status comes back in its entry)
        std::vector<CUpti_PCSamplingConfigurationInfo> attrs(9);
        attrs[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
        attrs[0].attributeData.samplingPeriodData.samplingPeriod = g_pcsamp_period;
        attrs[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
        attrs[1].attributeData.stallReasonData.stallReasonCount = reasons;
        attrs[1].attributeData.stallReasonData.pStallReasonIndex = g_reason_index.data();
        attrs[2].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE;
        attrs[2].attributeData.scratchBufferSizeData.scratchBufferSize = size_t(4) << 20;
        attrs[3].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE;
        attrs[3].attributeData.hardwareBufferSizeData.hardwareBufferSize = g_pc_hw_buffer;
        attrs[4].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_WORKER_THREAD_PERIODIC_SLEEP_SPAN;
        attrs[4].attributeData.workerThreadPeriodicSleepSpanData.workerThreadPeriodicSleepSpan = 5;
        attrs[5].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
        attrs[5].attributeData.collectionModeData.collectionMode = CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED;
        attrs[6].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL;
        attrs[6].attributeData.enableStartStopControlData.enableStartStopControl = 1;
        attrs[7].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT;
        attrs[7].attributeData.outputDataFormatData.outputDataFormat = CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED;
        attrs[8].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
        attrs[8].attributeData.samplingDataBufferData.samplingDataBuffer = &data;
        CUpti_PCSamplingConfigurationInfoParams cp = {CUpti_PCSamplingConfigurationInfoParamsSize};
        cp.ctx = ctx;
        cp.numAttributes = attrs.size();
        cp.pPCSamplingConfigurationInfo = attrs.data();
        good = ok(cuptiPCSamplingSetConfigurationAttribute(&cp), "cuptiPCSamplingSetConfigurationAttribute");
    }
    if (good) {
        CUpti_PCSamplingStartParams st = {CUpti_PCSamplingStartParamsSize};
        st.ctx = ctx;
        good = ok(cuptiPCSamplingStart(&st), "cuptiPCSamplingStart");
        if (good) {
            CUresult r = relaunch_here(l);
            if (r != CUDA_SUCCESS) ok(CUPTI_ERROR_UNKNOWN, "PC sampling pass: the kernel's own launch failed");
            CUpti_PCSamplingStopParams sp = {CUpti_PCSamplingStopParamsSize};
            sp.ctx = ctx;
            good = ok(cuptiPCSamplingStop(&sp), "cuptiPCSamplingStop") && r == CUDA_SUCCESS;
        }
    }
    // the data: what GetData hands over, then (at disable) whatever was left in the buffer given at setup
    auto take = [&]() {
        *total += data.totalSamples;
        *dropped += data.droppedSamples;
        for (size_t i = 0; i < data.totalNumPcs && i < max_pcs; ++i) {
            const auto& pc = pcs[i];
            PcRecord& rec = (*recs)[pc.pcOffset];
            if (rec.function.empty() && pc.functionName) rec.function = pc.functionName;
            rec.crc = pc.cubinCrc;
            rec.stall.resize(reasons, 0);
            for (size_t k = 0; k < pc.stallReasonCount; ++k) {
                uint32_t idx = pc.stallReason[k].pcSamplingStallReasonIndex;
                for (size_t j = 0; j < reasons; ++j)
                    if (g_reason_index[j] == idx) rec.stall[j] += pc.stallReason[k].samples;
            }
        }
        data.totalNumPcs = 0;
        data.totalSamples = 0;
        data.droppedSamples = 0;
    };
    // the records arrive in the buffer given at setup when sampling is disabled (cuptiPCSamplingGetData after the
    // stop handed over nothing on the H100 host, CUDA 13, and the records were then lost)
    CUpti_PCSamplingDisableParams dis = {CUpti_PCSamplingDisableParamsSize};
    dis.ctx = ctx;
    ok(cuptiPCSamplingDisable(&dis), "cuptiPCSamplingDisable");
    if (good) take();
    return good;
}

// The device's SASS metric configuration, set once, at the first deep launch's API_EXIT (H100, CUDA 13: set
// before a launch's range profiler passes, they record no range; set again after an unset, it fails with
// CUPTI_ERROR_OUT_OF_MEMORY).
bool sass_configure() {
    std::vector<CUpti_SassMetrics_Config> cfg;
    for (uint64_t id : g_sass.ids) cfg.push_back({id, CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU});
    CUpti_SassMetricsSetConfig_Params sc = {CUpti_SassMetricsSetConfig_Params_STRUCT_SIZE};
    sc.numOfMetricConfig = cfg.size();
    sc.pConfigs = cfg.data();
    sc.deviceIndex = g_sass.device;
    return ok(cuptiSassMetricsSetConfig(&sc), "cuptiSassMetricsSetConfig");
}

// SASS metrics of one run of the launch, per instruction, into recs (the configuration set: sass_configure).
bool sass_pass(CUcontext ctx, const Launch& l, std::map<uint64_t, PcRecord>* recs) {
    CUpti_SassMetricsEnable_Params en = {CUpti_SassMetricsEnable_Params_STRUCT_SIZE};
    en.ctx = ctx;
    en.enableLazyPatching = 1;
    if (!ok(cuptiSassMetricsEnable(&en), "cuptiSassMetricsEnable")) return false;
    CUresult r = relaunch_here(l);
    bool good = r == CUDA_SUCCESS;
    if (!good) ok(CUPTI_ERROR_UNKNOWN, "SASS metrics pass: the kernel's own launch failed");
    CUpti_SassMetricsGetDataProperties_Params dp = {CUpti_SassMetricsGetDataProperties_Params_STRUCT_SIZE};
    dp.ctx = ctx;
    good = good && ok(cuptiSassMetricsGetDataProperties(&dp), "cuptiSassMetricsGetDataProperties");
    if (good && dp.numOfPatchedInstructionRecords > 0) {
        const size_t n = dp.numOfPatchedInstructionRecords, inst = dp.numOfInstances ? dp.numOfInstances : 1;
        std::vector<CUpti_SassMetrics_Data> rows(n);
        std::vector<CUpti_SassMetrics_InstanceValue> values(n * inst * g_sass.names.size());
        for (size_t i = 0; i < n; ++i) {
            rows[i].structSize = sizeof(CUpti_SassMetrics_Data);
            rows[i].pInstanceValues = &values[i * inst * g_sass.names.size()];
        }
        CUpti_SassMetricsFlushData_Params fd = {CUpti_SassMetricsFlushData_Params_STRUCT_SIZE};
        fd.ctx = ctx;
        fd.numOfPatchedInstructionRecords = n;
        fd.numOfInstances = inst;
        fd.pMetricsData = rows.data();
        good = ok(cuptiSassMetricsFlushData(&fd), "cuptiSassMetricsFlushData");
        for (size_t i = 0; good && i < n; ++i) {
            const auto& row = rows[i];
            PcRecord& rec = (*recs)[row.pcOffset];
            if (rec.function.empty() && row.functionName) rec.function = row.functionName;
            if (rec.crc == 0) rec.crc = row.cubinCrc;
            rec.sass.resize(g_sass.names.size(), 0);
            for (size_t k = 0; k < inst * g_sass.names.size(); ++k) {
                const auto& v = row.pInstanceValues[k];
                for (size_t j = 0; j < g_sass.ids.size(); ++j)
                    if (g_sass.ids[j] == v.metricId) rec.sass[j] += v.value;
            }
        }
    }
    CUpti_SassMetricsDisable_Params dis = {CUpti_SassMetricsDisable_Params_STRUCT_SIZE};
    dis.ctx = ctx;
    ok(cuptiSassMetricsDisable(&dis), "cuptiSassMetricsDisable");
    return good;
}

// Both passes for one deep launch, each on the context's memory as it was before the launch, then the
// "source" line. Runs on a thread of its own (source_passes): CUPTI neither samples nor patches a launch made
// from inside one of its callbacks, which is where the intercepting thread is.
struct PcSampled {  // the PC sampling pass of the deep launch in flight
    std::map<uint64_t, PcRecord> recs;
    uint64_t total = 0, dropped = 0;
    bool ran = false;
    double wall_ns = 0;
};
CUpti_Checkpoint g_pre;       // the context's memory before the deep launch in flight (saved at its API_ENTER)
bool g_pre_saved = false;
bool g_sass_set = false;      // the device's SASS metric configuration, set once (see sass_configure)

bool checkpoint_ready() {
    if (!g_cu.ctx_synchronize || g_cu.ctx_synchronize() != CUDA_SUCCESS) {
        ok(CUPTI_ERROR_UNKNOWN, "source passes: cuCtxSynchronize before the checkpoint failed");
        return false;
    }
    if (!g_checkpoint.load()) {
        ok(CUPTI_ERROR_NOT_SUPPORTED, "source passes: CUPTI's checkpoint library (libcheckpoint.so) was not found");
        g_source = false;
        return false;
    }
    return true;
}

// At a deep launch's API_ENTER: its memory as the launch finds it, then PC sampling of one run of it (on that
// memory, restored afterwards). PC sampling here, before the launch's range profiler passes: after them, on
// the H100 host (CUDA 13), it counted samples but handed over no PC records.
PcSampled g_sampled;

void before_here(CUcontext ctx, const Launch& l) {
    g_pre_saved = false;
    g_sampled = PcSampled{};
    if (!checkpoint_ready()) return;
    g_pre = CUpti_Checkpoint{CUpti_Checkpoint_STRUCT_SIZE};
    g_pre.ctx = ctx;
    g_pre.allowOverwrite = 1;
    g_pre_saved = ok(g_checkpoint.save(&g_pre), "cuptiCheckpointSave");
    if (!g_pre_saved || !g_source_pc) return;
    auto t0 = std::chrono::steady_clock::now();
    g_sampled.ran = pc_sampling_pass(ctx, l, &g_sampled.recs, &g_sampled.total, &g_sampled.dropped);
    g_sampled.wall_ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    if (!ok(g_checkpoint.restore(&g_pre), "cuptiCheckpointRestore")) {
        ok(CUPTI_ERROR_UNKNOWN, "source passes: the checkpoint could not be restored; profiling stopped");
        g_broken = true;
    }
}

// At its API_EXIT, after the launch (and its range profiler passes): the SASS metrics pass on the memory as the
// launch found it, then the memory as the launch left it; the "source" line with both passes' records.
void source_passes_here(CUcontext ctx, const Launch& l, const char* mangled) {
    if (!g_pre_saved || !checkpoint_ready()) return;
    CUpti_Checkpoint post = {CUpti_Checkpoint_STRUCT_SIZE};
    post.ctx = ctx;
    post.allowOverwrite = 1;
    if (!ok(g_checkpoint.save(&post), "cuptiCheckpointSave")) {
        g_checkpoint.release(&g_pre);
        g_pre_saved = false;
        return;
    }
    auto t0 = std::chrono::steady_clock::now();
    std::map<uint64_t, PcRecord> recs = std::move(g_sampled.recs);
    uint64_t total = g_sampled.total, dropped = g_sampled.dropped;
    bool sampled = g_sampled.ran, counted = false, restored = true;
    if (g_source_sass && g_sass.configured) {
        if (!g_sass_set) g_sass_set = sass_configure();
        if (g_sass_set) {
            restored = ok(g_checkpoint.restore(&g_pre), "cuptiCheckpointRestore");
            counted = restored && sass_pass(ctx, l, &recs);
        }
    }
    restored = restored && ok(g_checkpoint.restore(&post), "cuptiCheckpointRestore");
    g_checkpoint.release(&post);
    g_checkpoint.release(&g_pre);
    g_pre_saved = false;
    if (!restored) {  // the program's memory may not be what it was: stop profiling, say so
        ok(CUPTI_ERROR_UNKNOWN, "source passes: the checkpoint could not be restored; profiling stopped");
        g_broken = true;
    }
    double wall_ns = g_sampled.wall_ns +
                     std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    std::string line = "{\"t\":\"source\",\"seq\":" + std::to_string(g_seq) + ",\"name\":";
    json_string(line, mangled);
    line += ",\"period\":" + std::to_string(g_pcsamp_period) + ",\"sampled\":" + (sampled ? "true" : "false") +
            ",\"counted\":" + (counted ? "true" : "false") + ",\"samples\":" + std::to_string(total) +
            ",\"dropped\":" + std::to_string(dropped) + ",\"wall_ns\":" + std::to_string(static_cast<long long>(wall_ns)) +
            ",\"reasons\":";
    json_names(line, g_reason_names);
    line += ",\"sass_metrics\":";
    json_names(line, g_sass.names);
    uint64_t crc = 0;  // the module this kernel's records name
    for (const auto& kv : recs)
        if (crc == 0 && (kv.second.function.empty() || std::strcmp(kv.second.function.c_str(), mangled) == 0))
            crc = kv.second.crc;
    line += ",\"cubin\":";
    json_string(line, save_cubin(crc).c_str());
    line += ",\"pcs\":[";
    bool first = true;
    for (const auto& kv : recs) {
        const PcRecord& rec = kv.second;
        if (!rec.function.empty() && std::strcmp(rec.function.c_str(), mangled) != 0) continue;  // another kernel's
        auto src = source_of(rec.crc, rec.function.empty() ? mangled : rec.function.c_str(), kv.first);
        if (!first) line += ',';
        first = false;
        line += "{\"pc\":" + std::to_string(kv.first) + ",\"file\":";
        json_string(line, src.first.c_str());
        line += ",\"line\":" + std::to_string(src.second) + ",\"stall\":[";
        for (size_t j = 0; j < rec.stall.size(); ++j) line += (j ? "," : "") + std::to_string(rec.stall[j]);
        line += "],\"sass\":[";
        for (size_t j = 0; j < rec.sass.size(); ++j) line += (j ? "," : "") + std::to_string(rec.sass[j]);
        line += "]}";
    }
    line += "]}";
    write_line(line);
}

// fn on a worker thread with the launch's context current; the caller (which holds g_mu, in one of the
// launch's callbacks) waits for it.
template <class Fn>
void on_worker(CUcontext ctx, Fn fn) {
    if (!g_cu.ctx_set_current) {
        ok(CUPTI_ERROR_NOT_SUPPORTED, "source passes: the driver has no cuCtxSetCurrent");
        return;
    }
    std::thread worker([&] {
        if (g_cu.ctx_set_current(ctx) == CUDA_SUCCESS) fn();
        else ok(CUPTI_ERROR_UNKNOWN, "source passes: cuCtxSetCurrent failed on the worker thread");
    });
    worker.join();
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
    const MetricSet& set = *t_set;
    std::vector<double> values(set.ptrs.size(), NAN);
    CUpti_Profiler_Host_EvaluateToGpuValues_Params ev = {CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
    ev.pHostObject = set.host;
    ev.pCounterDataImage = data.data();
    ev.counterDataImageSize = data.size();
    ev.rangeIndex = 0;
    ev.ppMetricNames = const_cast<const char**>(set.ptrs.data());
    ev.numMetrics = set.ptrs.size();
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
    char buf[360];
    std::snprintf(buf, sizeof buf,
                  ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"dyn_smem\":%u,\"regs\":%d,\"static_smem\":%d,"
                  "\"local_bytes\":%d,\"attr_error\":%d,\"max_blocks_per_sm\":%d,\"wall_ns\":%.0f,\"deep\":%s,"
                  "\"values\":{",
                  l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], l.dyn_smem, regs, static_smem,
                  local_bytes, attr_error, blocks, wall_ns, t_set == &g_deep ? "true" : "false");
    line += buf;
    for (size_t i = 0; i < values.size(); ++i) {
        if (i) line += ',';
        json_string(line, set.ptrs[i]);
        line += ':';
        json_double(line, values[i]);
    }
    line += "}}";
    write_line(line);
    g_profiled++;
}

bool matches(const char* mangled, const std::vector<std::string>& subs) {  // contains_any, or "*": every kernel
    return std::find(subs.begin(), subs.end(), "*") != subs.end() || contains_any(mangled, subs);
}

// The profiler range (KERNELSCOPE_METRICS_GATED): whether this callback is a profiler start or stop (of the
// driver, or of the runtime, which calls the driver's: both fire, and the range opens once). A start opens
// the range when it returns, a stop closes it when entered.
bool on_gate(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* info) {
    const bool drv = domain == CUPTI_CB_DOMAIN_DRIVER_API, rt = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
    const bool start = (drv && cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart) ||
                       (rt && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000);
    const bool stop = (drv && cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStop) ||
                      (rt && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000);
    if (!start && !stop) return false;
    if (info == nullptr || getpid() != g_pid) return true;
    if (start && info->callbackSite == CUPTI_API_EXIT && !g_gate_open.exchange(true)) g_gate_opened++;
    if (stop && info->callbackSite == CUPTI_API_ENTER) g_gate_open = false;
    return true;
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
        if (cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED && g_source && data != nullptr)
            on_module(static_cast<const CUpti_ResourceData*>(data));
        return;
    }
    const auto* info = static_cast<const CUpti_CallbackData*>(data);
    if (g_gated && on_gate(domain, cbid, info)) return;
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API || t_inner) return;  // t_inner: the source passes' own launches
    Launch l;
    if (info == nullptr || !read_launch(cbid, info->functionParams, &l)) return;
    if (info->callbackSite == CUPTI_API_ENTER) {
        if (g_gated && !g_gate_open.load()) return;  // outside the profiler range: neither counted nor profiled
        g_mu.lock();  // held until API_EXIT of a profiled launch: one range at a time, whatever the thread
        g_seq++;
        t_active = false;
        if (info->symbolName != nullptr && getpid() == g_pid) count(info->symbolName, l);
        if (g_broken || getpid() != g_pid || g_profiled + g_skipped >= g_max || info->symbolName == nullptr ||
            !wanted(info->symbolName, l)) {
            g_mu.unlock();
            return;
        }
        if (!g_configured) {  // first profiled launch: a context exists and the device is known now
            g_configured = true;
            CUdevice dev = 0;
            CUpti_Profiler_Initialize_Params pi = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
            if (!ok(cuptiProfilerInitialize(&pi), "cuptiProfilerInitialize") || !g_cu.load() ||
                g_cu.ctx_get_device(&dev) != CUDA_SUCCESS || !configure(dev)) {
                g_broken = true;
                g_mu.unlock();
                return;
            }
        }
        const bool deep = !g_deep.names.empty() && g_deep_count < g_deep_max && matches(info->symbolName, g_deep_kernels);
        if (deep) g_deep_count++;
        t_source = deep && g_source;
        if (t_source) {  // with the range profiler off on the context, as PC sampling needs it
            drop_object(info->context);
            on_worker(info->context, [&] { before_here(info->context, l); });
            if (g_broken) {
                t_source = false;
                g_skipped++;
                g_mu.unlock();
                return;
            }
        }
        t_set = deep ? &g_deep : &g_light;
        CUpti_RangeProfiler_Object* obj = object_for(info->context);
        if (obj == nullptr || !arm(obj, *t_set)) {
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
    if (t_source) {  // the SASS pass, with the range profiler off on the context as in the PC sampling pass
        CUcontext ctx = info->context;
        drop_object(ctx);
        const char* name = info->symbolName ? info->symbolName : "";
        on_worker(ctx, [&] { source_passes_here(ctx, l, name); });
        t_source = false;
    }
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
                       ",\"skipped\":" + std::to_string(g_skipped) + ",\"launches\":" + std::to_string(g_seq) +
                       ",\"configs\":[";
    bool first = true;
    for (const auto& kv : g_counts) {
        const auto& k = kv.first;
        if (!first) line += ',';
        first = false;
        line += "{\"name\":";
        json_string(line, std::get<0>(k).c_str());
        char buf[200];
        std::snprintf(buf, sizeof buf, ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"dyn_smem\":%u,\"launches\":%ld}",
                      std::get<1>(k), std::get<2>(k), std::get<3>(k), std::get<4>(k), std::get<5>(k), std::get<6>(k),
                      std::get<7>(k), kv.second);
        line += buf;
    }
    line += "],\"configs_capped\":" + std::string(g_counts.size() >= MAX_COUNTED ? "true" : "false") +
            ",\"gated\":" + (g_gated ? "true" : "false") + ",\"gate_opened\":" + std::to_string(g_gate_opened.load()) +
            '}';
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
    g_dir = dir;
    std::string path = std::string(dir) + "/metrics-" + std::to_string(static_cast<long long>(g_pid)) + ".jsonl";
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 || (g_out = fdopen(fd, "a")) == nullptr) {
        std::fprintf(stderr, "kernelscope-metrics: open %s: %s\n", path.c_str(), std::strerror(errno));
        return 1;
    }
    g_wanted = split(std::getenv("KERNELSCOPE_METRICS"), ',');
    g_wanted_deep = split(std::getenv("KERNELSCOPE_METRICS_DEEP"), ',');
    g_kernel_filters = split(std::getenv("KERNELSCOPE_METRICS_KERNELS"), '|');
    g_deep_kernels = split(std::getenv("KERNELSCOPE_DEEP_KERNELS"), '|');
    g_sass_wanted = split(std::getenv("KERNELSCOPE_SASS_METRICS"), ',');
    if (const char* f = std::getenv("KERNELSCOPE_SOURCE"); f != nullptr) {
        g_source = std::strcmp(f, "1") == 0 || std::strcmp(f, "pc") == 0 || std::strcmp(f, "sass") == 0;
        g_source_pc = std::strcmp(f, "sass") != 0;
        g_source_sass = std::strcmp(f, "pc") != 0;
    }
    if (const char* f = std::getenv("KERNELSCOPE_METRICS_FILTER"); f != nullptr && f[0] != '\0') g_filter = f;
    if (const char* g = std::getenv("KERNELSCOPE_METRICS_GATED"); g != nullptr) g_gated = std::strcmp(g, "1") == 0;
    if (const char* m = std::getenv("KERNELSCOPE_METRICS_MAX"); m != nullptr && m[0] != '\0') g_max = std::atol(m);
    if (const char* m = std::getenv("KERNELSCOPE_DEEP_MAX"); m != nullptr && m[0] != '\0') g_deep_max = std::atol(m);
    if (const char* p = std::getenv("KERNELSCOPE_PCSAMP_PERIOD"); p != nullptr && p[0] != '\0') {
        long v = std::atol(p);
        g_pcsamp_period = static_cast<unsigned>(v < 5 ? 5 : v > 31 ? 31 : v);
    }
    if (const char* b = std::getenv("KERNELSCOPE_PCSAMP_BUFFER_MB"); b != nullptr && b[0] != '\0') {
        long v = std::atol(b);
        g_pc_hw_buffer = size_t(v < 1 ? 1 : v > 4096 ? 4096 : v) << 20;
    }
    if (g_wanted.empty()) {
        ok(CUPTI_ERROR_INVALID_PARAMETER, "KERNELSCOPE_METRICS is empty");
        return 1;
    }
    // cuptiProfilerInitialize waits for the first profiled launch: called here, during the driver's own
    // initialisation, it fails (CUPTI_ERROR_UNKNOWN on the H100 host, CUDA 13)
    CUpti_SubscriberHandle sub = nullptr;
    if (!ok(cuptiSubscribe(&sub, on_callback, nullptr), "cuptiSubscribe")) return 1;
    const CUpti_CallbackId ids[] = {
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz};
    for (auto id : ids) ok(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id), "cuptiEnableCallback");
    if (g_source)
        ok(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED), "cuptiEnableCallback");
    if (g_gated) {  // the profiler range: the driver's start and stop, and the runtime's (which call them)
        for (auto id : {CUPTI_DRIVER_TRACE_CBID_cuProfilerStart, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop})
            ok(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id), "cuptiEnableCallback");
        for (auto id : {CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000})
            ok(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, id), "cuptiEnableCallback");
    }
    std::atexit(at_exit);
    return 1;
}
