// kernelscope CUPTI activity tracer, loaded into a CUDA process through CUDA_INJECTION64_PATH.
//
// The CUDA driver calls InitializeInjection() once, from cuInit. We then ask CUPTI for activity
// records (kernels, copies, memsets, runtime and driver API calls, synchronizations, NVTX markers)
// and write each one as a JSON object on its own line to $KERNELSCOPE_TRACE_DIR/trace-<pid>.jsonl.
//
// Line formats (all timestamps are CUPTI nanosecond timestamps, as integers):
//   {"t":"meta","pid":..,"cupti_api":..,"ts":..,"disabled":[..]}   first line written by each process
//   {"t":"kernel",..} {"t":"memcpy",..} {"t":"memset",..} {"t":"api",..} {"t":"sync",..} {"t":"marker",..}
//   {"t":"dropped","n":..}   records CUPTI lost for lack of buffer space (sum all such lines)
//   {"t":"end","ts":..}      written by the exit handler after the final forced flush
//
// Nothing here may take the host program down: a failing CUPTI call prints one line on stderr and
// the tracer carries on with whatever still works.

#include <cupti.h>

#include <cxxabi.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

constexpr size_t kBufferBytes = 8u << 20;  // one activity buffer: 8 MiB
constexpr size_t kBufferAlign = 8;         // CUPTI wants 8-byte aligned buffers

// ---- error reporting ------------------------------------------------------------------------

bool report(CUptiResult res, const char* call) {
    if (res == CUPTI_SUCCESS) return true;
    const char* text = nullptr;
    if (cuptiGetResultString(res, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
    std::fprintf(stderr, "kernelscope-trace: %s: %s\n", call, text);
    return false;
}

// ---- JSON line building ---------------------------------------------------------------------

// Length of the valid UTF-8 sequence starting at s (at most n bytes available), or 0 if invalid.
size_t utf8_length(const unsigned char* s, size_t n) {
    unsigned char c = s[0];
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (len > n) return 0;
    for (size_t i = 1; i < len; ++i) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;  // overlong
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;                                              // surrogate
    return len;
}

void append_json_string(std::string& out, const char* s) {
    if (s == nullptr) {
        out += "null";
        return;
    }
    static const char kHex[] = "0123456789abcdef";
    const auto* p = reinterpret_cast<const unsigned char*>(s);
    size_t n = std::strlen(s);
    out += '"';
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        if (c < 0x80) {
            switch (c) {
                case '"': out += "\\\""; break;
                case '\\': out += "\\\\"; break;
                case '\n': out += "\\n"; break;
                case '\r': out += "\\r"; break;
                case '\t': out += "\\t"; break;
                case '\b': out += "\\b"; break;
                case '\f': out += "\\f"; break;
                default:
                    if (c < 0x20) {
                        out += "\\u00";
                        out += kHex[c >> 4];
                        out += kHex[c & 0xF];
                    } else {
                        out += static_cast<char>(c);
                    }
            }
            ++i;
            continue;
        }
        size_t len = utf8_length(p + i, n - i);
        if (len == 0) {  // a stray byte would make the whole line unreadable: replace it
            out += "\\ufffd";
            ++i;
        } else {
            out.append(s + i, len);
            i += len;
        }
    }
    out += '"';
}

// Appends `"key":value` pairs to one JSON object; close() ends the object and the line.
class Line {
public:
    explicit Line(std::string& out, const char* type) : out_(out) {
        out_ += "{\"t\":\"";
        out_ += type;
        out_ += '"';
    }
    Line& u(const char* key, uint64_t v) {
        this->key(key);
        out_ += std::to_string(v);
        return *this;
    }
    Line& i(const char* key, int64_t v) {
        this->key(key);
        out_ += std::to_string(v);
        return *this;
    }
    Line& s(const char* key, const char* v) {
        this->key(key);
        append_json_string(out_, v);
        return *this;
    }
    Line& dim3(const char* key, int64_t x, int64_t y, int64_t z) {
        this->key(key);
        out_ += '[';
        out_ += std::to_string(x);
        out_ += ',';
        out_ += std::to_string(y);
        out_ += ',';
        out_ += std::to_string(z);
        out_ += ']';
        return *this;
    }
    Line& raw(const char* key, const std::string& json) {
        this->key(key);
        out_ += json;
        return *this;
    }
    void close() { out_ += "}\n"; }

private:
    void key(const char* k) {
        out_ += ",\"";
        out_ += k;
        out_ += "\":";
    }
    std::string& out_;
};

// ---- the output file ------------------------------------------------------------------------

// Objects with destructors are allocated once and never freed: CUPTI's thread may still deliver a
// buffer while static destructors run at exit.
std::mutex g_file_mu;                               // guards everything in this block
std::string& g_dir = *new std::string;              // $KERNELSCOPE_TRACE_DIR, read once at injection
FILE* g_file = nullptr;                             // trace-<g_file_pid>.jsonl
pid_t g_file_pid = 0;
bool g_closed = false;                              // set by the exit handler: later records are dropped
uint32_t g_cupti_api = 0;
std::vector<std::string>& g_disabled = *new std::vector<std::string>;  // kinds CUPTI refused to enable
pid_t g_init_pid = 0;                               // the process that ran InitializeInjection

// Opens (or, after a fork, re-opens) the file of the calling process and writes its meta line.
// Caller holds g_file_mu.
bool ensure_open_locked() {
    pid_t pid = getpid();
    if (g_file != nullptr && g_file_pid == pid) return true;
    if (g_file != nullptr) {  // inherited from the parent: its buffer was flushed before fork
        std::fclose(g_file);
        g_file = nullptr;
    }
    std::string path = g_dir + "/trace-" + std::to_string(static_cast<long long>(pid)) + ".jsonl";
    // Append, not truncate: a process that exec()s another traced CUDA program keeps its pid.
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        std::fprintf(stderr, "kernelscope-trace: open %s: %s\n", path.c_str(), std::strerror(errno));
        return false;
    }
    g_file = fdopen(fd, "a");
    if (g_file == nullptr) {
        std::fprintf(stderr, "kernelscope-trace: fdopen %s: %s\n", path.c_str(), std::strerror(errno));
        close(fd);
        return false;
    }
    g_file_pid = pid;

    uint64_t ts = 0;
    report(cuptiGetTimestamp(&ts), "cuptiGetTimestamp");
    std::string disabled = "[";
    for (size_t k = 0; k < g_disabled.size(); ++k) {
        if (k) disabled += ',';
        append_json_string(disabled, g_disabled[k].c_str());
    }
    disabled += ']';
    Dl_info where{};
    const char* cupti_file = dladdr(reinterpret_cast<void*>(&cuptiActivityEnable), &where) && where.dli_fname
                                 ? where.dli_fname : "";
    std::string lib = "";
    append_json_string(lib, cupti_file);
    std::string meta;
    Line(meta, "meta").i("pid", pid).u("cupti_api", g_cupti_api).u("ts", ts).raw("disabled", disabled)
        .raw("cupti", lib).close();
    std::fwrite(meta.data(), 1, meta.size(), g_file);
    std::fflush(g_file);
    return true;
}

void emit(const std::string& lines) {
    if (lines.empty()) return;
    std::lock_guard<std::mutex> lock(g_file_mu);
    if (g_closed || !ensure_open_locked()) return;
    std::fwrite(lines.data(), 1, lines.size(), g_file);
    std::fflush(g_file);  // keeps records of processes that end with _exit, and fork safe
}

// fork(): no other thread may hold the file lock or have half-written data while the child is made.
void before_fork() {
    g_file_mu.lock();
    if (g_file != nullptr) std::fflush(g_file);
}
void after_fork() { g_file_mu.unlock(); }

// ---- names ----------------------------------------------------------------------------------

std::mutex g_names_mu;
auto& g_demangled = *new std::unordered_map<std::string, std::string>;
auto& g_api_names = *new std::unordered_map<uint64_t, std::string>;  // domain << 32 | cbid -> name or ""

std::string demangle(const char* mangled) {
    std::lock_guard<std::mutex> lock(g_names_mu);
    auto it = g_demangled.find(mangled);
    if (it != g_demangled.end()) return it->second;
    int status = 0;
    char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    std::string name = (status == 0 && d != nullptr) ? std::string(d) : std::string(mangled);
    std::free(d);
    g_demangled.emplace(mangled, name);
    return name;
}

// The API function's name, or an empty string when CUPTI does not know the id.
std::string api_name(CUpti_CallbackDomain domain, uint32_t cbid) {
    uint64_t key = (static_cast<uint64_t>(domain) << 32) | cbid;
    std::lock_guard<std::mutex> lock(g_names_mu);
    auto it = g_api_names.find(key);
    if (it != g_api_names.end()) return it->second;
    const char* name = nullptr;
    std::string out;
    if (report(cuptiGetCallbackName(domain, cbid, &name), "cuptiGetCallbackName") && name != nullptr) out = name;
    g_api_names.emplace(key, out);  // cached, so an unknown id is reported once
    return out;
}

// ---- activity records -----------------------------------------------------------------------

void format_record(std::string& out, const CUpti_Activity* rec) {
    switch (rec->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
            const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
            std::string name;
            if (k->name != nullptr) name = demangle(k->name);
            Line(out, "kernel")
                .s("name", k->name ? name.c_str() : nullptr)
                .s("mangled", k->name)
                .u("start", k->start)
                .u("end", k->end)
                .u("dev", k->deviceId)
                .u("ctx", k->contextId)
                .u("stream", k->streamId)
                .u("corr", k->correlationId)
                .dim3("grid", k->gridX, k->gridY, k->gridZ)
                .dim3("block", k->blockX, k->blockY, k->blockZ)
                .u("regs", k->registersPerThread)
                .i("ssmem", k->staticSharedMemory)
                .i("dsmem", k->dynamicSharedMemory)
                .u("lmem", k->localMemoryPerThread)
                .u("graph", k->graphId)
                .close();
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
            Line(out, "memcpy")
                .u("kind", m->copyKind)
                .u("src", m->srcKind)
                .u("dst", m->dstKind)
                .u("bytes", m->bytes)
                .u("start", m->start)
                .u("end", m->end)
                .u("dev", m->deviceId)
                .u("ctx", m->contextId)
                .u("stream", m->streamId)
                .u("corr", m->correlationId)
                .u("async", (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) ? 1 : 0)
                .u("graph", m->graphId)
                .close();
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
            Line(out, "memset")
                .u("bytes", m->bytes)
                .u("value", m->value)
                .u("mem", m->memoryKind)
                .u("start", m->start)
                .u("end", m->end)
                .u("dev", m->deviceId)
                .u("ctx", m->contextId)
                .u("stream", m->streamId)
                .u("corr", m->correlationId)
                .u("async", (m->flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) ? 1 : 0)
                .u("graph", m->graphId)
                .close();
            break;
        }
        case CUPTI_ACTIVITY_KIND_RUNTIME:
        case CUPTI_ACTIVITY_KIND_DRIVER: {
            const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
            bool rt = rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
            std::string name = api_name(rt ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, a->cbid);
            Line(out, "api")
                .s("dom", rt ? "rt" : "drv")
                .u("cbid", a->cbid)
                .s("name", name.empty() ? nullptr : name.c_str())
                .u("start", a->start)
                .u("end", a->end)
                .u("tid", a->threadId)
                .u("corr", a->correlationId)
                .u("ret", a->returnValue)
                .close();
            break;
        }
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
            const auto* y = reinterpret_cast<const CUpti_ActivitySynchronization2*>(rec);
            auto id = [](uint32_t v) -> int64_t {
                return v == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? int64_t{-1} : static_cast<int64_t>(v);
            };
            Line(out, "sync")
                .u("type", static_cast<uint32_t>(y->type))
                .u("start", y->start)
                .u("end", y->end)
                .u("ctx", y->contextId)
                .i("stream", id(y->streamId))
                .u("corr", y->correlationId)
                .i("event", id(y->cudaEventId))
                .close();
            break;
        }
        case CUPTI_ACTIVITY_KIND_MARKER: {
            const auto* mk = reinterpret_cast<const CUpti_ActivityMarker2*>(rec);
            Line(out, "marker")
                .u("flags", static_cast<uint32_t>(mk->flags))
                .u("ts", mk->timestamp)
                .u("id", mk->id)
                .s("name", mk->name)
                .s("domain", mk->domain)
                .close();
            break;
        }
        default:
            break;  // kinds we did not ask for, or do not understand
    }
}

void emit_dropped(size_t n) {
    if (n == 0) return;
    std::string line;
    Line(line, "dropped").u("n", n).close();
    emit(line);
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    void* p = nullptr;
    if (posix_memalign(&p, kBufferAlign, kBufferBytes) != 0) p = nullptr;
    *buffer = static_cast<uint8_t*>(p);
    *size = p ? kBufferBytes : 0;  // no buffer: CUPTI counts the records it has to drop
    *max_records = 0;              // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t /*size*/, size_t valid) {
    if (buffer == nullptr) return;
    std::string lines;
    lines.reserve(valid / 2 + 256);
    CUpti_Activity* rec = nullptr;
    if (valid > 0) {
        for (;;) {
            CUptiResult res = cuptiActivityGetNextRecord(buffer, valid, &rec);
            if (res == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // end of this buffer
            if (!report(res, "cuptiActivityGetNextRecord")) break;
            format_record(lines, rec);
        }
    }
    std::free(buffer);
    emit(lines);
    size_t dropped = 0;
    if (report(cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped), "cuptiActivityGetNumDroppedRecords"))
        emit_dropped(dropped);
}

// ---- flushing -------------------------------------------------------------------------------

std::atomic<bool> g_flushing{false};  // one flush at a time

// A plain flush that finds another one running is skipped; the forced flush at exit waits for it.
void flush(uint32_t flag) {
    while (g_flushing.exchange(true)) {
        if (!flag) return;
        std::this_thread::yield();
    }
    report(cuptiActivityFlushAll(flag), flag ? "cuptiActivityFlushAll(forced)" : "cuptiActivityFlushAll");
    g_flushing.store(false);
}

// Driver API callback: cuProfilerStop (and so cudaProfilerStop) hands over what was recorded so
// far, for programs that end with _exit and never run the exit handler.
void CUPTIAPI on_driver_api(void* /*userdata*/, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                            const void* data) {
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cbid != CUPTI_DRIVER_TRACE_CBID_cuProfilerStop) return;
    const auto* info = static_cast<const CUpti_CallbackData*>(data);
    if (info == nullptr || info->callbackSite != CUPTI_API_EXIT) return;
    static thread_local bool inside = false;
    if (inside) return;
    inside = true;
    flush(0);
    inside = false;
}

void at_exit() {
    if (getpid() != g_init_pid) return;  // a forked child: CUDA is not usable there
    flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    size_t dropped = 0;
    if (report(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), "cuptiActivityGetNumDroppedRecords"))
        emit_dropped(dropped);
    uint64_t ts = 0;
    report(cuptiGetTimestamp(&ts), "cuptiGetTimestamp");
    std::string line;
    Line(line, "end").u("ts", ts).close();
    emit(line);
    std::lock_guard<std::mutex> lock(g_file_mu);
    if (g_file != nullptr) {
        std::fclose(g_file);
        g_file = nullptr;
    }
    g_closed = true;
}

struct KindToTrace {
    CUpti_ActivityKind kind;
    const char* name;
};

const KindToTrace kKinds[] = {
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "concurrent_kernel"},
    {CUPTI_ACTIVITY_KIND_MEMCPY, "memcpy"},
    {CUPTI_ACTIVITY_KIND_MEMSET, "memset"},
    {CUPTI_ACTIVITY_KIND_RUNTIME, "runtime"},
    {CUPTI_ACTIVITY_KIND_DRIVER, "driver"},
    {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "synchronization"},
    {CUPTI_ACTIVITY_KIND_MARKER, "marker"},
};

}  // namespace

// NVTX's injection entry point. NVTX_INJECTION64_PATH names this library rather than libcupti itself:
// a process may already hold a libcupti loaded from another folder (PyTorch links its own), and a
// second copy of CUPTI would receive the NVTX ranges while the first one records the activity. So the
// call goes to the CUPTI instance this library is linked against.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(const void* export_table) {
    Dl_info where{};
    if (!dladdr(reinterpret_cast<void*>(&cuptiActivityEnable), &where) || where.dli_fname == nullptr) return 0;
    void* handle = dlopen(where.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) return 0;
    using Init = int (*)(const void*);
    auto init = reinterpret_cast<Init>(dlsym(handle, "InitializeInjectionNvtx2"));
    int ok = init != nullptr ? init(export_table) : 0;
    if (init == nullptr) std::fprintf(stderr, "kernelscope-trace: %s has no InitializeInjectionNvtx2\n", where.dli_fname);
    dlclose(handle);
    return ok;
}

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
    static std::atomic<bool> done{false};
    if (done.exchange(true)) return 1;
    const char* dir = std::getenv("KERNELSCOPE_TRACE_DIR");
    if (dir == nullptr || dir[0] == '\0') return 1;  // not asked to trace

    {
        std::lock_guard<std::mutex> lock(g_file_mu);
        g_dir = dir;
        while (g_dir.size() > 1 && g_dir.back() == '/') g_dir.pop_back();
        g_init_pid = getpid();
        report(cuptiGetVersion(&g_cupti_api), "cuptiGetVersion");
    }

    // No lock is held across CUPTI calls: CUPTI may hand over a buffer on this very thread.
    if (!report(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
                "cuptiActivityRegisterCallbacks"))
        return 1;  // no way to receive records
    for (const auto& k : kKinds) {
        std::string call = std::string("cuptiActivityEnable(") + k.name + ")";
        if (!report(cuptiActivityEnable(k.kind), call.c_str())) {
            std::lock_guard<std::mutex> lock(g_file_mu);
            g_disabled.emplace_back(k.name);
        }
    }

    CUpti_SubscriberHandle subscriber = nullptr;
    if (report(cuptiSubscribe(&subscriber, on_driver_api, nullptr), "cuptiSubscribe")) {
        report(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop),
               "cuptiEnableCallback(cuProfilerStop)");
    }

    if (std::atexit(at_exit) != 0) std::fprintf(stderr, "kernelscope-trace: atexit: registration failed\n");
    pthread_atfork(before_fork, after_fork, after_fork);
    std::lock_guard<std::mutex> lock(g_file_mu);
    ensure_open_locked();  // the meta line comes first, even in a process that records nothing
    return 1;
}
