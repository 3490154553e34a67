// cache/: the entry file format of the persistent cache and the memory LRU (ProgramCache).
#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cache/entry_file.h"
#include "cache/program_cache.h"
#include "cache/stable_hash.h"
#include "test_harness.h"

using namespace tpu;
using namespace tpu::testing;

TEST(cache_entry_round_trip_and_damage) {
  cache::Program program;
  program.parameters = {{cache::Program::Parameter::Source::Storage, 0},
                        {cache::Program::Parameter::Source::Number, 3},
                        {cache::Program::Parameter::Source::RngState, 1}};
  program.output_types = {{DType::F32, {2, 3}}, {DType::I64, {}}};
  program.output_storages = {0, 2};
  program.output_dtypes = {DType::F32, DType::BF16};
  program.quick = std::make_shared<cache::Program::QuickTier>();
  program.quick->text = "module {}";
  program.quick->elements_per_run = 6;
  const std::string key = std::string("prefix\0program", 14);
  const std::string bytes = cache::encode_entry(key, program, "EXECUTABLE");

  cache::Program back;
  std::string executable;
  EXPECT(cache::decode_entry(bytes, key, back, executable).empty());
  EXPECT(executable == "EXECUTABLE");
  EXPECT(back.parameters.size() == 3 && back.parameters[1].index == 3 &&
         back.parameters[2].source == cache::Program::Parameter::Source::RngState);
  EXPECT(back.output_types == program.output_types);
  EXPECT(back.output_storages == program.output_storages && back.output_dtypes == program.output_dtypes);
  // A quick program loaded from the disk can still be upgraded: it keeps its text and its work.
  EXPECT(back.quick && back.quick->text == "module {}" && back.quick->elements_per_run == 6);

  EXPECT(contains(cache::decode_entry(bytes.substr(0, bytes.size() - 1), key, back, executable), "truncated"));
  EXPECT(contains(cache::decode_entry(bytes.substr(0, 10), key, back, executable), "truncated"));
  std::string flipped = bytes;
  flipped[flipped.size() - 3] ^= 1;
  EXPECT(contains(cache::decode_entry(flipped, key, back, executable), "checksum"));
  std::string foreign = bytes;
  foreign[8] = 7;
  EXPECT(contains(cache::decode_entry(foreign, key, back, executable), "format 7"));
  EXPECT(contains(cache::decode_entry(bytes, key + "x", back, executable), "another program"));
  EXPECT(cache::decode_entry(bytes, "", back, executable).empty());
  EXPECT(cache::fnv1a64(std::string("a")) == 0xaf63dc4c8601ec8cULL);
}


namespace {

// A program told apart by its tag: which key it was made for.
cache::ProgramPtr tagged(int32_t tag) {
  auto program = std::make_shared<cache::Program>();
  program->output_storages = {tag};
  return program;
}

int32_t tag_of(const cache::ProgramPtr& program) { return program->output_storages.at(0); }

}  // namespace

TEST(program_cache_finds_what_it_holds) {
  cache::ProgramCache programs;
  EXPECT(programs.size() == 0 && !programs.find_in_memory("a"));
  EXPECT(programs.counters().misses == 0);  // find() follows a memory-only miss and counts it
  EXPECT(!programs.find("a"));
  EXPECT(programs.counters().misses == 1);
  cache::ProgramPtr first = tagged(1);
  programs.insert("a", first);
  EXPECT(programs.find("a") == first && programs.find_in_memory("a") == first);
  EXPECT(programs.counters().memory_hits == 2 && programs.counters().misses == 1);
  // Keys are bytes: an embedded NUL is part of them.
  const std::string x("k\0x", 3), y("k\0y", 3);
  programs.insert(x, tagged(2));
  programs.insert(y, tagged(3));
  EXPECT(tag_of(programs.find(x)) == 2 && tag_of(programs.find(y)) == 3 && !programs.find("k"));
  // Inserting a held key replaces its program.
  cache::ProgramPtr second = tagged(4);
  programs.insert("a", second);
  EXPECT(programs.find("a") == second && programs.size() == 3);
  programs.clear();
  EXPECT(programs.size() == 0 && !programs.find_in_memory("a"));
  EXPECT(tag_of(first) == 1);  // a program outlives its entry for whoever still runs it
}

TEST(program_cache_evicts_the_least_recently_used_beyond_its_capacity) {
  cache::ProgramCache programs;
  programs.set_capacity(3);
  for (const char* key : {"a", "b", "c"}) programs.insert(key, tagged(key[0]));
  EXPECT(programs.find_in_memory("a"));  // a is now the most recently used, b the least
  programs.insert("d", tagged('d'));
  EXPECT(!programs.find_in_memory("b") && programs.size() == 3);
  programs.insert("c", tagged('c'));  // a re-insert is a use too
  programs.insert("e", tagged('e'));
  EXPECT(!programs.find_in_memory("a"));
  for (const char* key : {"c", "d", "e"}) EXPECT(programs.find_in_memory(key) && tag_of(programs.find_in_memory(key)) == key[0]);
  programs.set_capacity(1);  // shrinking evicts at once, keeping the most recent
  EXPECT(programs.size() == 1 && programs.find_in_memory("e"));
  programs.set_capacity(0);  // at least one program is kept
  programs.insert("f", tagged('f'));
  EXPECT(programs.size() == 1 && programs.find_in_memory("f"));

  // Against a plain model: a list, most recent first, cut to the capacity after each change.
  programs.clear();
  std::vector<int> model;
  size_t capacity = 4;
  programs.set_capacity(capacity);
  uint32_t state = 7;
  for (int step = 0; step < 2000; ++step) {
    state = state * 1664525u + 1013904223u;
    int key = static_cast<int>((state >> 16) % 10);
    int action = static_cast<int>((state >> 8) % 8);
    auto it = std::find(model.begin(), model.end(), key);
    if (action < 3) {  // insert
      if (it != model.end()) model.erase(it);
      model.insert(model.begin(), key);
      programs.insert(std::to_string(key), tagged(key));
    } else if (action < 7) {  // look up
      cache::ProgramPtr found = programs.find_in_memory(std::to_string(key));
      EXPECT((found != nullptr) == (it != model.end()));
      if (found) {
        EXPECT(tag_of(found) == key);
        model.erase(it);
        model.insert(model.begin(), key);
      }
    } else {  // resize
      capacity = 2 + (state >> 4) % 5;
      programs.set_capacity(capacity);
    }
    if (model.size() > capacity) model.resize(capacity);
    EXPECT(programs.size() == model.size());
  }
}

// Under pressure (the process's memory maps near the kernel's cap, faked here) the least recently
// used quarter goes, checked once every kPressureInterval inserts; without it the capacity rules.
TEST(program_cache_sheds_a_quarter_under_pressure) {
  cache::ProgramCache programs;
  bool pressure = false;
  int checks = 0;
  programs.set_pressure_check([&] {
    ++checks;
    return pressure;
  });
  const int interval = static_cast<int>(cache::ProgramCache::kPressureInterval);
  for (int i = 0; i < 2 * interval; ++i) programs.insert("k" + std::to_string(i), tagged(i));
  EXPECT(checks == 2 && programs.size() == static_cast<size_t>(2 * interval));
  EXPECT(programs.counters().pressure_evictions == 0);
  EXPECT(programs.find_in_memory("k0"));  // k0 is now the most recently used, k1 the least
  pressure = true;
  for (int i = 2 * interval; i < 3 * interval; ++i) programs.insert("k" + std::to_string(i), tagged(i));
  size_t kept = 3 * interval - 3 * interval / 4;
  EXPECT(checks == 3 && programs.size() == kept);
  EXPECT(programs.counters().pressure_evictions == static_cast<int64_t>(3 * interval / 4));
  EXPECT(!programs.find_in_memory("k1") && programs.find_in_memory("k0"));
  EXPECT(programs.find_in_memory("k" + std::to_string(3 * interval - 1)));
  programs.set_pressure_check(nullptr);
  for (int i = 0; i < 2 * interval; ++i) programs.insert("m" + std::to_string(i), tagged(i));
  EXPECT(checks == 3 && programs.size() == kept + 2 * interval);
}

// Threads inserting and looking up the same and their own keys: a lookup sees a whole program made
// for its key, never another's, and the counters and the bound hold once they are done.
TEST(program_cache_serves_threads_at_once) {
  constexpr int kThreads = 8, kOwn = 50, kShared = 16, kRounds = 20000;
  cache::ProgramCache programs;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<cache::ProgramPtr> mine;
      for (int i = 0; i < kRounds; ++i) {
        int own = i % kOwn;
        std::string key = "thread" + std::to_string(t) + "-" + std::to_string(own);
        if (i < kOwn) {
          mine.push_back(tagged(t * 1000 + own));
          programs.insert(key, mine.back());
        } else if (programs.find(key) != mine[own]) {
          ++wrong;
        }
        int shared = (i + t) % kShared;
        std::string common = "shared-" + std::to_string(shared);
        programs.insert(common, tagged(shared));
        cache::ProgramPtr found = programs.find_in_memory(common);
        if (!found || tag_of(found) != shared) ++wrong;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT(wrong == 0);
  EXPECT(programs.size() == static_cast<size_t>(kThreads * kOwn + kShared));
  // Every lookup hit: no count was lost to a race.
  const int64_t lookups = static_cast<int64_t>(kThreads) * ((kRounds - kOwn) + kRounds);
  EXPECT(programs.counters().memory_hits == lookups && programs.counters().misses == 0);

  // Now under a bound far below the keys in use: lookups miss or find their own key's program.
  cache::ProgramCache bounded;
  bounded.set_capacity(32);
  threads.clear();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      uint32_t state = 100 + t;
      for (int i = 0; i < kRounds; ++i) {
        state = state * 1664525u + 1013904223u;
        int key = static_cast<int>((state >> 12) % 200);
        if (state >> 31) bounded.insert(std::to_string(key), tagged(key));
        cache::ProgramPtr found = bounded.find(std::to_string(key));
        if (found && tag_of(found) != key) ++wrong;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT(wrong == 0);
  EXPECT(bounded.size() == 32);
  cache::ProgramCache::Counters counted = bounded.counters();
  EXPECT(counted.memory_hits + counted.misses == static_cast<int64_t>(kThreads) * kRounds && counted.disk_hits == 0);
  bounded.insert("after", tagged(-1));
  EXPECT(tag_of(bounded.find("after")) == -1 && bounded.size() == 32);
}
