// tessera._C.run_cuda: the GPU runtime (tessera::Runtime), one per CUDA device, on the caller's stream.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "request_args.hpp"
#include "tessera/error.hpp"

#if TESSERA_PY_GPU
#include <cuda_runtime_api.h>

#include "tessera/cuda_types.hpp"
#include "tessera/runtime.hpp"
#endif

namespace tessera::py {

namespace nb = nanobind;

#if TESSERA_PY_GPU
namespace {

/// Makes `device` current for the scope and restores the previous device afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) {
      const cudaError_t e = cudaSetDevice(device);
      if (e != cudaSuccess) throw Error(ErrorCode::kCudaError, "q", std::string("cudaSetDevice: ") + cudaGetErrorString(e));
    }
  }
  ~DeviceGuard() {
    int now = -1;
    if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

/// Serializes use of the runtimes (tessera::Runtime is not thread-safe; calls run without the GIL).
std::mutex& runtime_mutex() {
  static std::mutex m;
  return m;
}

/// The runtimes, one per device (null: not created yet). Call with runtime_mutex() held.
std::vector<std::unique_ptr<Runtime>>& runtimes() {
  static std::vector<std::unique_ptr<Runtime>> r;
  return r;
}

/// The user plan table new runtimes load ("" = the embedded table; set_plan_table_path). Call with runtime_mutex() held.
std::string& user_plan_table_path() {
  static std::string path;
  return path;
}

/// One Runtime per device, created on first use with that device current (loading user_plan_table_path(): a table
/// that does not fit this GPU throws Error(kFormatError, "plan_table_path") naming the file, and no runtime is kept).
/// Lives until the module is unloaded or set_plan_table_path() drops it. Call with runtime_mutex() held.
Runtime& runtime_for(int device) {
  std::vector<std::unique_ptr<Runtime>>& rts = runtimes();
  if (device < 0) throw Error(ErrorCode::kInvalidArgument, "q", "negative CUDA device ordinal");
  if (static_cast<std::size_t>(device) >= rts.size()) rts.resize(device + 1);
  if (!rts[device]) {
    DeviceGuard g(device);
    RuntimeOptions opt;
    opt.plan_table_path = user_plan_table_path();
    rts[device] = std::make_unique<Runtime>(opt);
  }
  return *rts[device];
}

/// The runtime of `device` for the dispatch queries: the ordinal must name a visible GPU (argument "device").
Runtime& queried_runtime(int device) {
  const int n = cuda_device_count();
  if (device < 0 || device >= n)
    throw Error(ErrorCode::kInvalidArgument, "device",
                n == 0 ? std::string("no CUDA device is visible")
                       : "no CUDA device " + std::to_string(device) + " (" + std::to_string(n) + " visible)");
  return runtime_for(device);
}

}  // namespace
#endif

void bind_gpu(nb::module_& m) {
  m.def("has_cuda", [] { return TESSERA_PY_GPU != 0; },
        "True when this build of tessera._C contains the GPU runtime (it may still find no GPU at run time).");
#if TESSERA_PY_GPU
  m.def(
      "run_cuda",
      [](const Array& q, const Array& k, const Array& v, const Array& o, const std::optional<Array>& lse, int block_q,
         int block_kv, int mask_kind, const Array& m0, const std::optional<Array>& m1, std::int64_t mb,
         std::int64_t mh, std::int64_t n_qb, std::int64_t n_kvb, std::optional<double> scale, std::uintptr_t stream,
         std::uint64_t mask_version, const std::string& plan_id) {
        const AttentionRequest r = make_request(q, k, v, o, lse, block_q, block_kv, mask_kind, m0, m1, mb, mh, n_qb,
                                                n_kvb, scale);
        if (r.q.device != Device::kCuda) throw Error(ErrorCode::kInvalidArgument, "q", "run_cuda needs CUDA tensors");
        const int device = device_ordinal(q);
        RunOptions opt;
        opt.mask_version = mask_version;
        opt.plan_id = plan_id;
        nb::gil_scoped_release release;
        std::lock_guard<std::mutex> lock(runtime_mutex());
        DeviceGuard g(device);
        runtime_for(device).run(r, reinterpret_cast<Stream>(stream), opt);
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("o"), nb::arg("lse").none(), nb::arg("block_q"),
      nb::arg("block_kv"), nb::arg("mask_kind"), nb::arg("m0"), nb::arg("m1").none(), nb::arg("mb"), nb::arg("mh"),
      nb::arg("n_qb"), nb::arg("n_kvb"), nb::arg("scale").none(), nb::arg("stream"), nb::arg("mask_version"),
      nb::arg("plan_id"),
      "Computes E(M) on the GPU of q into o (and lse), enqueued on `stream` (a cudaStream_t as an integer; the\n"
      "caller's current stream). Low-level: use tessera.block_sparse_attention.");
  m.def(
      "last_dispatch_cuda",
      [](int device) {
        DispatchInfo info;
        {
          std::lock_guard<std::mutex> lock(runtime_mutex());
          info = queried_runtime(device).last_dispatch();
        }
        return dispatch_to_dict(info);
      },
      nb::arg("device"), "Dispatch dict of the last run_cuda() on `device`.");
  m.def(
      "set_plan_table_path",
      [](const std::string& path) {
        std::lock_guard<std::mutex> lock(runtime_mutex());
        user_plan_table_path() = path;
        runtimes().clear();  // recreated on next use with the new table (mu(M) buffers and caches start over)
      },
      nb::arg("path"),
      "Makes every GPU runtime use the user plan table `path` ('' = the embedded table); drops the existing runtimes.\n"
      "Low-level: use tessera.load_plan_table (it checks the file first).");
  m.def(
      "runtime_info",
      [](int device) {
        std::lock_guard<std::mutex> lock(runtime_mutex());
        Runtime& rt = queried_runtime(device);
        nb::dict d;
        d["arch"] = rt.arch();
        d["table_status"] = rt.table_status();
        return d;
      },
      nb::arg("device"), "Architecture and plan-table status of the runtime of `device`.");
  m.def(
      "eligible_plans_cuda",
      [](const Array& q, const Array& k, const Array& v, const Array& o, const std::optional<Array>& lse, int block_q,
         int block_kv, int mask_kind, const Array& m0, const std::optional<Array>& m1, std::int64_t mb,
         std::int64_t mh, std::int64_t n_qb, std::int64_t n_kvb) {
        const AttentionRequest r = make_request(q, k, v, o, lse, block_q, block_kv, mask_kind, m0, m1, mb, mh, n_qb,
                                                n_kvb, std::nullopt);
        std::lock_guard<std::mutex> lock(runtime_mutex());
        return runtime_for(device_ordinal(q)).eligible_plans(r);
      },
      "Ids of every plan eligible for the request in this build.");
#endif
}

}  // namespace tessera::py
