#pragma once
/// @file worker_pool.hpp
/// Runs one draining worker function on several threads (the worker takes jobs from a shared counter until none is
/// left, so any number of threads, the calling one included, completes every job).
#include <cstddef>
#include <functional>
#include <thread>

namespace tessera::corpus {

/// Starts a thread running a function (the default: std::thread's constructor). Tests replace it to make thread
/// creation fail.
using SpawnThread = std::function<std::thread(std::function<void()>)>;

/// Runs `worker` on min(requested, jobs) threads (requested <= 0: the hardware concurrency) and joins them all.
/// When a thread cannot be started (std::system_error), no more are started, the calling thread runs `worker` as
/// well, and every started thread is still joined. `worker` must not throw. Returns the number of threads that ran
/// `worker` (0 when jobs is 0).
int run_workers(int requested, std::size_t jobs, const std::function<void()>& worker, const SpawnThread& spawn = {});

}  // namespace tessera::corpus
