// Writing a corpus: inputs checked before anything is written (repeated families, a bad STA table), worker threads
// capped at the jobs and always joined, even when a thread cannot be started.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "tessera/error.hpp"
#include "tessera_corpus/corpus_writer.hpp"
#include "tessera_corpus/family.hpp"
#include "tessera_corpus/worker_pool.hpp"
#include "temp_path.hpp"

using namespace tessera::corpus;
namespace fs = std::filesystem;

TEST(CorpusWriter, RepeatedFamilyRejected) {
  CorpusOptions opt;
  opt.families = {"Q64K64", "Q16K16", "Q64K64"};
  try {
    (void)selected_families(opt);
    ADD_FAILURE() << "a repeated family was accepted";
  } catch (const tessera::Error& e) {
    EXPECT_EQ(e.code(), tessera::ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.argument(), "families");
    EXPECT_NE(e.message().find("'Q64K64' is given more than once"), std::string::npos) << e.what();
  }
  opt.families = {"Q64K64", "Q16K16"};
  EXPECT_EQ(selected_families(opt), (std::vector<std::string>{"Q64K64", "Q16K16"}));
}

// A malformed STA table with STA-real selected: the error comes before any file (or the directory) is written.
TEST(CorpusWriter, BadStaTableWritesNothing) {
  const fs::path dir = tessera::testing::unique_temp_path("tessera_corpus_writer_test");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path table = dir / "bad_sta.json";
  std::ofstream(table) << "{\"not\": \"a table\"";
  const fs::path out = dir / "corpus";
  CorpusOptions opt;
  opt.small = true;
  opt.families = {"Q64K64", "STA-real"};
  opt.sta_table = table.string();
  EXPECT_THROW(write_corpus(out.string(), opt, 1), tessera::Error);
  EXPECT_FALSE(fs::exists(out)) << "output written before the STA table was checked";
  opt.families = {"Q64K64", "Q64K64"};
  EXPECT_THROW(write_corpus(out.string(), opt, 1), tessera::Error);
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(dir);
}

// Never more threads than jobs; every job done whatever the request.
TEST(CorpusWriter, WorkersCappedAtJobs) {
  for (const int requested : {0, 1, 3, 40000}) {
    std::atomic<std::size_t> next{0}, done{0};
    const std::size_t jobs = 5;
    const auto worker = [&] {
      while (next++ < jobs) ++done;
    };
    std::atomic<int> spawned{0};
    const SpawnThread count = [&](std::function<void()> f) {
      ++spawned;
      return std::thread(std::move(f));
    };
    const int used = run_workers(requested, jobs, worker, count);
    EXPECT_LE(used, int(jobs)) << requested;
    EXPECT_EQ(spawned.load(), used) << requested;
    if (requested > 0) {
      EXPECT_EQ(used, std::min(requested, int(jobs)));
    }
    EXPECT_EQ(done.load(), jobs) << requested;
  }
  EXPECT_EQ(run_workers(8, 0, [] {}), 0);
}

// When starting a thread fails, the started ones are joined (no std::terminate) and the calling thread finishes
// the jobs.
TEST(CorpusWriter, ThreadStartFailureJoinsAndFinishes) {
  std::atomic<std::size_t> next{0}, done{0};
  const std::size_t jobs = 1000;
  const auto worker = [&] {
    while (next++ < jobs) ++done;
  };
  int calls = 0;
  const SpawnThread fail_third = [&](std::function<void()> f) {
    if (++calls == 3) throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
    return std::thread(std::move(f));
  };
  EXPECT_EQ(run_workers(8, jobs, worker, fail_third), 3);  // two threads and the caller
  EXPECT_EQ(done.load(), jobs);
  calls = 2;  // the first spawn fails: the caller alone
  next = 0;
  done = 0;
  EXPECT_EQ(run_workers(8, jobs, worker, fail_third), 1);
  EXPECT_EQ(done.load(), jobs);
}
