// cache/: the entry file format of the persistent cache and the memory LRU (ProgramCache).
#include <string>

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

