#include "tessera_corpus/worker_pool.hpp"

#include <algorithm>
#include <system_error>
#include <vector>

namespace tessera::corpus {

namespace {
// Joins every started thread when it goes out of scope, an exception included.
struct JoinAll {
  std::vector<std::thread> threads;
  ~JoinAll() {
    for (auto& t : threads)
      if (t.joinable()) t.join();
  }
};
}  // namespace

int run_workers(int requested, std::size_t jobs, const std::function<void()>& worker, const SpawnThread& spawn) {
  if (jobs == 0) return 0;
  std::size_t n = requested > 0 ? std::size_t(requested) : std::max(1u, std::thread::hardware_concurrency());
  n = std::min(n, jobs);
  JoinAll pool;
  pool.threads.reserve(n);
  for (std::size_t t = 0; t < n; ++t) {
    try {
      pool.threads.push_back(spawn ? spawn(worker) : std::thread(worker));
    } catch (const std::system_error&) {
      worker();  // no more threads: the calling thread drains what is left
      return int(pool.threads.size()) + 1;
    }
  }
  return int(pool.threads.size());
}

}  // namespace tessera::corpus
