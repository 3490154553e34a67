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

