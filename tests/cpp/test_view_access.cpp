// lowering/view_access: reading and writing strided views of a flat storage inside a program, at
// constant and runtime offsets and at padded (bucket) sizes.
#include <string>
#include <vector>

#include "hlo/builder.h"
#include "lowering/view_access.h"
#include "test_harness.h"

using namespace tpu;
using namespace tpu::testing;

// Every placement kind (contiguous range, strided slice, permutation, broadcast, gather) read and
// written at a runtime offset gives what the same view with its offset as a constant gives.
TEST(views_at_runtime_offsets_equal_views_at_constant_offsets) {
  REQUIRE_PLUGIN();
  struct Case {
    Dims sizes, strides;
  };
  const std::vector<Case> cases = {{{2, 3}, {3, 1}}, {{3, 2}, {6, 2}}, {{3, 4}, {1, 3}}, {{3, 4}, {0, 1}},
                                   {{2, 2}, {5, 3}}, {{4}, {7}}};
  std::vector<float> base(48);
  for (int i = 0; i < 48; ++i) base[i] = static_cast<float>(i);
  for (const Case& c : cases) {
    for (int64_t offset : {0, 1, 4, 9}) {
      lowering::ViewLayout layout{c.sizes, c.strides, offset};
      if (!lowering::offset_is_runtime(layout, 48)) continue;
      for (bool write : {false, true}) {
        if (write && (c.strides[0] == 0 || c.strides[1 % c.strides.size()] == 0)) continue;
        auto build = [&](bool runtime) {
          hlo::Builder b;
          auto x = b.parameter({DType::F32, {48}});
          hlo::Value start = runtime ? b.parameter({DType::I64, {}}) : hlo::Value{};
          auto view = lowering::read_view(b, x, layout, start);
          if (!write) return b.module_text({view});
          auto doubled = b.add(view, view);
          return b.module_text({lowering::write_view(b, x, doubled, layout, start)});
        };
        TensorType result{DType::F32, write ? Dims{48} : c.sizes};
        auto constant = run_f32(build(false), base, {}, result, true);
        auto runtime = run_f32(build(true), base, {offset}, result, true);
        EXPECT(constant == runtime);
      }
    }
  }
}

// A padded view whose strides are constants, read and written as a (strided) range, gives what
// the element-by-element gather and scatter give; a write leaves what its padding covers as it was.
TEST(padded_views_as_ranges_equal_padded_views_by_element) {
  REQUIRE_PLUGIN();
  struct Case {
    Dims real, bucket, strides;
    uint64_t padded;
    int64_t offset;
  };
  // Rows of a [n, 12] storage (q of a split qkv), a transposed [n, 2, 2] head view, a row slice.
  const std::vector<Case> cases = {{{3, 4}, {4, 4}, {12, 1}, 1, 0},
                                   {{3, 4}, {4, 4}, {12, 1}, 1, 8},
                                   {{2, 3, 2}, {2, 4, 2}, {2, 4, 1}, 2, 0},
                                   {{5}, {8}, {3}, 1, 1}};
  std::vector<float> base(48);
  for (int i = 0; i < 48; ++i) base[i] = static_cast<float>(i);
  for (const Case& c : cases) {
    EXPECT(lowering::fits_window(c.bucket, c.strides, c.offset, 48, true));
    for (bool write : {false, true}) {
      auto build = [&](bool window) {
        hlo::Builder b;
        auto x = b.parameter({DType::F32, {48}});
        lowering::RuntimeLayout layout{c.bucket, c.padded, false, window ? c.strides : Dims{}, {}, {}, {}};
        layout.offset = b.parameter({DType::I64, {}});
        for (size_t d = 0; d < c.bucket.size(); ++d) layout.runtime_sizes.push_back(b.parameter({DType::I64, {}}));
        for (size_t d = 0; d < c.bucket.size(); ++d) layout.strides.push_back(b.parameter({DType::I64, {}}));
        auto view = lowering::read_padded_view(b, x, layout, 0.0);
        if (!write) return b.module_text({view});
        return b.module_text({lowering::write_padded_view(b, x, b.add(view, b.full(100.0, b.type(view))), layout)});
      };
      std::vector<int64_t> scalars{c.offset};
      scalars.insert(scalars.end(), c.real.begin(), c.real.end());
      scalars.insert(scalars.end(), c.strides.begin(), c.strides.end());
      TensorType result{DType::F32, write ? Dims{48} : c.bucket};
      EXPECT(run_f32(build(true), base, scalars, result, true) == run_f32(build(false), base, scalars, result, true));
    }
  }
  // A bucket that would reach past the storage from its offset is not a range.
  EXPECT(!lowering::fits_window({8}, {3}, 30, 48, false));
}


namespace {

// The base element each view position stands for, positions in row-major order.
std::vector<int64_t> positions_of(const Dims& sizes, const Dims& strides, int64_t offset) {
  std::vector<int64_t> out;
  Dims at(sizes.size(), 0);
  for (int64_t n = 0; n < numel(sizes); ++n) {
    int64_t p = offset;
    for (size_t d = 0; d < sizes.size(); ++d) p += at[d] * strides[d];
    out.push_back(p);
    for (size_t d = sizes.size(); d-- > 0;) {
      if (++at[d] < sizes[d]) break;
      at[d] = 0;
    }
  }
  return out;
}

std::vector<float> ramp(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

}  // namespace

TEST(offsets_are_runtime_arguments_except_for_whole_storages_and_views_past_their_end) {
  EXPECT(!lowering::offset_is_runtime({{5, 8}, {8, 1}, 0}, 40));  // the whole storage
  EXPECT(lowering::offset_is_runtime({{5, 8}, {8, 1}, 0}, 41));   // its start only
  EXPECT(lowering::offset_is_runtime({{2, 8}, {8, 1}, 16}, 40));  // x[i] of a [5, 8] storage
  EXPECT(lowering::offset_is_runtime({{3, 2}, {12, 3}, 10}, 40)); // a slice whose last element is in
  EXPECT(!lowering::offset_is_runtime({{3, 2}, {12, 3}, 13}, 40));  // ... and one whose is past the end
  EXPECT(!lowering::offset_is_runtime({{4}, {1}, -1}, 40));
  EXPECT(!lowering::offset_is_runtime({{4}, {-3}, 11}, 40));  // only the gather knows negative strides
  EXPECT(!lowering::offset_is_runtime({{0, 3}, {3, 1}, 4}, 40));
  lowering::ViewLayout dense = lowering::dense_layout({2, 3, 4}, 5);
  EXPECT((dense.strides == Dims{12, 4, 1}) && dense.offset == 5 && lowering::is_contiguous(dense));
  EXPECT(lowering::is_contiguous({{2, 1, 3}, {3, 17, 1}, 0}));  // a size-1 dim's stride is any
  EXPECT(!lowering::is_contiguous({{3, 4}, {1, 3}, 0}));
}

// Views that differ only in a size-1 dim's stride get one description (so one key and one program),
// and it is the dense one wherever the other dims are dense.
TEST(unit_dims_get_the_dense_stride) {
  struct Case {
    Dims sizes, strides, expected;
  };
  const std::vector<Case> cases = {
      {{1, 5}, {29, 1}, {5, 1}},           // x[:, -5:] of a [1, 29] sequence
      {{1, 5}, {30, 1}, {5, 1}},           // ... after it grew by one
      {{5, 1}, {1, 5}, {1, 1}},            // a transposed column
      {{2, 1, 3}, {3, 17, 1}, {3, 3, 1}},  // a size-1 middle dim
      {{3, 1, 4}, {1, 99, 3}, {1, 12, 3}},  // around a permuted view, its dims untouched
      {{1, 1}, {7, 3}, {1, 1}},
      {{4, 2}, {0, 1}, {0, 1}},            // a broadcast keeps its zero stride
  };
  for (const Case& c : cases) {
    Dims strides = c.strides;
    lowering::canonicalize_unit_strides(strides, c.sizes);
    EXPECT(strides == c.expected);
  }
}

// Each placement kind read and written, at a constant offset and (where the view allows) a runtime
// one: the elements must be those its sizes, strides and offset name, and the cheap forms must be
// taken where the header promises them (a gather or scatter only where nothing else fits).
TEST(views_of_every_placement_kind_read_and_write_the_elements_they_name) {
  struct Case {
    const char* kind;
    Dims sizes, strides;
    int64_t offset;
    bool by_element;  // only a gather / scatter reaches it
    bool writable;    // every position a distinct element
  };
  const std::vector<Case> cases = {
      {"range", {2, 3}, {3, 1}, 5, false, true},
      {"whole storage", {5, 8}, {8, 1}, 0, false, true},
      {"permutation", {3, 4}, {1, 3}, 2, false, true},
      {"size-1 dims", {2, 1, 3}, {3, 17, 1}, 7, false, true},
      {"broadcast", {3, 4}, {0, 1}, 6, false, false},
      {"broadcast strided slice", {2, 3, 2}, {0, 6, 2}, 1, false, false},
      {"strided slice", {3, 2}, {6, 2}, 1, false, true},
      {"strided slice near the end", {3, 2}, {12, 3}, 10, false, true},
      {"irregular strides", {2, 2}, {5, 3}, 1, true, true},
      {"negative stride", {4}, {-3}, 11, true, true},
      {"overlapping windows", {3, 3}, {1, 1}, 4, true, false},
      {"empty", {0, 3}, {3, 1}, 4, false, true},
  };
  const int64_t length = 40;
  const std::vector<float> base = ramp(length, 0);
  for (const Case& c : cases) {
    lowering::ViewLayout layout{c.sizes, c.strides, c.offset};
    std::vector<int64_t> positions = positions_of(c.sizes, c.strides, c.offset);
    bool whole = c.offset == 0 && numel(c.sizes) == length;
    for (bool runtime : {false, true}) {
      if (runtime && !lowering::offset_is_runtime(layout, length)) continue;
      for (bool write : {false, true}) {
        if (write && !c.writable) continue;
        hlo::Builder b;
        auto x = b.parameter({DType::F32, {length}});
        hlo::Value start = runtime ? b.parameter({DType::I64, {}}) : hlo::Value{};
        hlo::Value result = lowering::read_view(b, x, layout, start);
        std::vector<float> update = ramp(static_cast<size_t>(numel(c.sizes)), 100);
        if (write) {
          auto u = b.parameter({DType::F32, c.sizes});
          result = lowering::write_view(b, x, u, layout, start);
        }
        std::string text = b.module_text({result});
        EXPECT(contains(text, write ? "stablehlo.scatter" : "stablehlo.gather") == c.by_element);
        // Overwriting a whole storage needs no update-slice: the update is its new value.
        if (write && whole && !runtime) EXPECT(!contains(text, "dynamic_update_slice"));
        if (!have_plugin()) continue;
        std::vector<HostTensor> arguments{HostTensor::of(DType::F32, {length}, base)};
        if (runtime) arguments.push_back(HostTensor::of(DType::I64, {}, std::vector<int64_t>{c.offset}));
        if (write) arguments.push_back(HostTensor::of(DType::F32, c.sizes, update));
        TensorType type{DType::F32, write ? Dims{length} : c.sizes};
        std::vector<float> got = run_program(text, arguments, {type})[0].values<float>();
        std::vector<float> expected = write ? base : std::vector<float>();
        for (size_t i = 0; i < positions.size(); ++i) {
          if (write) {
            expected[positions[i]] = update[i];
          } else {
            expected.push_back(base[positions[i]]);
          }
        }
        if (got != expected) throw Failure{std::string("view kind '") + c.kind + (write ? "' written" : "' read") +
                                           (runtime ? " at a runtime offset" : "") + " differs from its elements"};
      }
    }
  }
}

// A padded view in each of its three forms (a dense prefix, a strided window, element by element)
// read with each kind of fill, and written: real positions are the elements the real sizes name,
// padding reads as the fill, and a write changes the real positions only (the prefix form may also
// write its padding into the room after the view, which belongs to no other view).
TEST(padded_views_read_their_real_elements_and_write_nothing_else) {
  enum class Form { Prefix, Window, ByElement };
  struct Case {
    Form form;
    Dims real, bucket, strides;
    uint64_t padded;
    int64_t offset;
  };
  const std::vector<Case> cases = {
      {Form::Prefix, {3, 4}, {4, 4}, {4, 1}, 1, 8},
      {Form::Window, {3, 4}, {4, 4}, {12, 1}, 1, 2},
      {Form::Window, {2, 3, 2}, {2, 4, 2}, {2, 4, 1}, 2, 0},
      {Form::ByElement, {5}, {8}, {3}, 1, 1},
      {Form::ByElement, {3, 2}, {4, 4}, {1, 5}, 3, 4},
  };
  const int64_t length = 48;
  const std::vector<float> base = ramp(length, 0);
  const double no_fill = std::nan("");
  for (const Case& c : cases) {
    if (c.form == Form::Window) EXPECT(lowering::fits_window(c.bucket, c.strides, c.offset, length, true));
    // Real positions of the bucket, and the base element each stands for.
    std::vector<int64_t> at = positions_of(c.bucket, c.strides, c.offset);
    std::vector<bool> real;
    Dims index(c.bucket.size(), 0);
    for (int64_t n = 0; n < numel(c.bucket); ++n) {
      bool inside = true;
      for (size_t d = 0; d < c.bucket.size(); ++d) inside &= index[d] < c.real[d];
      real.push_back(inside);
      for (size_t d = c.bucket.size(); d-- > 0;) {
        if (++index[d] < c.bucket[d]) break;
        index[d] = 0;
      }
    }
    for (int what = 0; what < 5; ++what) {  // reads with fills 0, -inf, none; the mask; a write
      const double fills[] = {0.0, -INFINITY, no_fill};
      hlo::Builder b;
      auto x = b.parameter({DType::F32, {length}});
      lowering::RuntimeLayout layout{c.bucket, c.padded, c.form == Form::Prefix,
                                     c.form == Form::Window ? c.strides : Dims{}, b.parameter({DType::I64, {}}), {}, {}};
      for (size_t d = 0; d < c.bucket.size(); ++d) layout.runtime_sizes.push_back(b.parameter({DType::I64, {}}));
      for (size_t d = 0; d < c.bucket.size(); ++d) layout.strides.push_back(b.parameter({DType::I64, {}}));
      hlo::Value result;
      std::vector<float> update = ramp(static_cast<size_t>(numel(c.bucket)), 100);
      if (what < 3) {
        result = lowering::read_padded_view(b, x, layout, fills[what]);
      } else if (what == 3) {
        result = lowering::padding_mask(b, layout);
      } else {
        result = lowering::write_padded_view(b, x, b.parameter({DType::F32, c.bucket}), layout);
      }
      std::string text = b.module_text({result});
      if (what != 3) {
        EXPECT(contains(text, what == 4 ? "stablehlo.scatter" : "stablehlo.gather") == (c.form == Form::ByElement));
      }
      if (!have_plugin()) continue;
      std::vector<HostTensor> arguments{HostTensor::of(DType::F32, {length}, base),
                                        HostTensor::of(DType::I64, {}, std::vector<int64_t>{c.offset})};
      for (int64_t size : c.real) arguments.push_back(HostTensor::of(DType::I64, {}, std::vector<int64_t>{size}));
      for (int64_t stride : c.strides) arguments.push_back(HostTensor::of(DType::I64, {}, std::vector<int64_t>{stride}));
      if (what == 4) arguments.push_back(HostTensor::of(DType::F32, c.bucket, update));
      TensorType type{what == 3 ? DType::Bool : DType::F32, what == 4 ? Dims{length} : c.bucket};
      HostTensor got = run_program(text, arguments, {type})[0];
      if (what == 3) {
        std::vector<uint8_t> mask = got.values<uint8_t>();
        for (size_t i = 0; i < real.size(); ++i) EXPECT(mask[i] == (real[i] ? 1 : 0));
      } else if (what < 3) {
        std::vector<float> values = got.values<float>();
        for (size_t i = 0; i < real.size(); ++i) {
          if (real[i]) {
            EXPECT(values[i] == base[at[i]]);
          } else if (!std::isnan(fills[what])) {
            EXPECT(values[i] == static_cast<float>(fills[what]));
          }
        }
      } else {
        std::vector<float> written = got.values<float>();
        std::vector<bool> touched(length, false);
        for (size_t i = 0; i < real.size(); ++i) {
          if (!real[i]) continue;
          EXPECT(written[at[i]] == update[i]);
          touched[at[i]] = true;
        }
        for (int64_t p = 0; p < length; ++p) {
          bool in_room = c.form == Form::Prefix && p >= c.offset && p < c.offset + numel(c.bucket);
          if (!touched[p] && !in_room) EXPECT(written[p] == base[p]);
        }
      }
    }
  }
}
