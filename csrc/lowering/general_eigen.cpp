// Eigenvalues and eigenvectors of general (non-symmetric) square matrices: linalg_eig and
// _linalg_eigvals, batched, real or complex input, complex results (as CPU returns them).
//
// The classical route, in complex arithmetic throughout so that one shifted QR step serves real
// and complex eigenvalues alike: a Householder reduction to Hessenberg form, then explicit
// single-shift QR steps by Givens rotations with Wilkinson's shift (an exceptional shift after ten
// steps without progress), deflating from the bottom, until the matrix is upper triangular (its
// complex Schur form T = Z^H A Z). Each batch element keeps its own shift and active size, and the
// rotations of finished rows are the identity, so one program serves the batch. Eigenvectors are
// T's (a back substitution per eigenvalue, all at once, with LAPACK's guard against equal
// eigenvalues) mapped back by Z, each scaled to unit norm with its largest component real, as
// LAPACK's geev scales them. The eigenvalues come in another order than LAPACK's (whose real Schur
// form deflates in its own order): PyTorch promises none.
#include <limits>

#include "lowering/elementwise.h"
#include "lowering/helpers.h"
#include "lowering/matrices.h"

namespace tpu::lowering {
namespace {

using hlo::Builder;


// The smallest normal number of a real dtype.
double smallest_normal(DType real) {
  return real == DType::F64 ? std::numeric_limits<double>::min() : std::numeric_limits<float>::min();
}

TensorType part_type(Builder& b, Value z) { return {complex_part_dtype(b.dtype(z)), b.dims(z)}; }
Value real_part(Builder& b, Value z) { return b.op1("stablehlo.real", {z}, part_type(b, z)); }
Value magnitude(Builder& b, Value z) { return b.op1("stablehlo.abs", {z}, part_type(b, z)); }
Value as_complex(Builder& b, Value x, DType complex) {
  return b.op1("stablehlo.complex", {x, b.zeros(b.type(x))}, {complex, b.dims(x)});
}

// A real v where it is positive, 1 elsewhere: a divisor that leaves zeros alone.
Value positive_or_one(Builder& b, Value v) {
  return b.select(b.compare(v, b.zeros(b.type(v)), "GT"), v, b.full(1, b.type(v)));
}

// z / |z|, and 1 where z is 0.
Value unit_phase(Builder& b, Value z) {
  Value size = magnitude(b, z);
  Value phase = b.div(z, as_complex(b, positive_or_one(b, size), b.dtype(z)));
  return b.select(b.compare(size, b.zeros(b.type(size)), "EQ"), b.full(1, b.type(z)), phase);
}

// x [B, n, n] times y [B, n, k], and x^H y.
Value batched_product(Builder& b, Value x, Value y) { return b.dot_general(x, y, {0}, {0}, {2}, {1}, b.dtype(x)); }
Value adjoint_product(Builder& b, Value x, Value y) {
  return b.dot_general(conjugate(b, x), y, {0}, {0}, {1}, {1}, b.dtype(x));
}

// Rows (dim 1) or columns (dim 2) k and k + 1 of x [B, n, n] as [B, 2, n] or [B, n, 2].
Value pair_at(Builder& b, Value x, Value k, int64_t dim) {
  const Dims& dims = b.dims(x);
  Value zero = b.constant(0, DType::I32);
  std::vector<Value> start{zero, zero, zero};
  start[dim] = k;
  Dims sizes = dims;
  sizes[dim] = 2;
  return b.dynamic_slice(x, start, sizes);
}
Value set_pair_at(Builder& b, Value x, Value pair, Value k, int64_t dim) {
  Value zero = b.constant(0, DType::I32);
  std::vector<Value> start{zero, zero, zero};
  start[dim] = k;
  return b.dynamic_update_slice(x, pair, start);
}
Value part_of_pair(Builder& b, Value pair, int64_t which, int64_t dim) {
  Dims dims = b.dims(pair), start{0, 0, 0}, limit = dims;
  start[dim] = which;
  limit[dim] = which + 1;
  return b.slice(pair, start, limit, {1, 1, 1});
}

// Element (i, j) of each matrix of x [B, n, n], for per-batch i and j [B] (i32), as [B].
Value element_at(Builder& b, Value x, Value i, Value j) {
  const Dims& dims = b.dims(x);
  TensorType index{DType::I32, dims};
  Value at = op(b, "and", b.compare(b.iota(index, 1), b.broadcast_in_dim(i, dims, {0}), "EQ"),
                b.compare(b.iota(index, 2), b.broadcast_in_dim(j, dims, {0}), "EQ"));
  return b.reduce(b.select(at, x, b.zeros(b.type(x))), b.zeros({b.dtype(x), {}}), {1, 2}, "stablehlo.add");
}

// Householder reduction to Hessenberg form: (H, Z) with A = Z H Z^H.
std::pair<Value, Value> hessenberg(Builder& b, Value a) {
  const Dims& dims = b.dims(a);
  int64_t batch = dims[0], n = dims[1];
  DType dtype = b.dtype(a), real = complex_part_dtype(dtype);
  Value z = identity_matrices(b, b.type(a));
  if (n < 3) return {a, z};
  TensorType counter{DType::I32, {}};
  std::vector<TensorType> state{b.type(a), b.type(a), counter};
  hlo::RegionRef cond = b.region(state, [&](Builder& r, const std::vector<Value>& s) {
    return std::vector<Value>{r.compare(s[2], r.constant(static_cast<double>(n - 2), DType::I32), "LT")};
  });
  hlo::RegionRef body = b.region(state, [&](Builder& r, const std::vector<Value>& s) {
    Value h = s[0], q = s[1], k = s[2];
    Value zero = r.constant(0, DType::I32);
    Value column = r.dynamic_slice(h, {zero, zero, k}, {batch, n, 1});  // [B, n, 1]
    TensorType rows_type{DType::I32, {batch, n, 1}};
    Value rows = r.iota(rows_type, 1), below = r.broadcast_to(r.add(k, r.constant(1, DType::I32)), {batch, n, 1});
    Value x = r.select(r.compare(rows, below, "GE"), column, r.zeros(r.type(column)));
    Value x_norm = op(r, "sqrt", r.reduce(r.mul(magnitude(r, x), magnitude(r, x)), r.constant(0, real), {1, 2},
                                          "stablehlo.add"));                                        // [B]
    Value first = r.select(r.compare(rows, below, "EQ"), x, r.zeros(r.type(x)));
    Value alpha = r.reduce(first, r.zeros({dtype, {}}), {1, 2}, "stablehlo.add");                    // [B]
    Value shift = r.broadcast_in_dim(r.mul(unit_phase(r, alpha), as_complex(r, x_norm, dtype)), {batch, n, 1}, {0});
    Value v = r.add(x, r.select(r.compare(rows, below, "EQ"), shift, r.zeros(r.type(x))));
    Value v_size = magnitude(r, v);
    Value v_norm = op(r, "sqrt", r.reduce(r.mul(v_size, v_size), r.constant(0, real), {1, 2}, "stablehlo.add"));
    // Unit, or zero where the column is already reduced.
    Value w = r.div(v, as_complex(r, r.broadcast_in_dim(positive_or_one(r, v_norm), {batch, n, 1}, {0}), dtype));
    Value two = r.full(2, {dtype, {batch, n, 1}});
    // H <- P H P and Z <- Z P with P = I - 2 w w^H.
    h = r.sub(h, batched_product(r, r.mul(two, w), adjoint_product(r, w, h)));
    Value w_h = swap_last_two(r, conjugate(r, w));
    h = r.sub(h, batched_product(r, batched_product(r, h, r.mul(two, w)), w_h));
    q = r.sub(q, batched_product(r, batched_product(r, q, r.mul(two, w)), w_h));
    return std::vector<Value>{h, q, r.add(k, r.constant(1, DType::I32))};
  });
  std::vector<Value> loop = b.op("stablehlo.while", {a, z, b.constant(0, DType::I32)}, state, "", {cond, body});
  return {loop[0], loop[1]};
}

// Shifted QR steps on H until it is upper triangular; Z accumulates the rotations.
std::pair<Value, Value> schur_form(Builder& b, Value h, Value z) {
  const Dims& dims = b.dims(h);
  int64_t batch = dims[0], n = dims[1];
  DType dtype = b.dtype(h), real = complex_part_dtype(dtype);
  double eps = machine_epsilon(real);
  if (n < 2) return {h, z};
  TensorType counter{DType::I32, {}}, per_batch{DType::I32, {batch}};
  // State: H, Z, active size m [B], steps since the last deflation [B], total steps.
  std::vector<TensorType> state{b.type(h), b.type(z), per_batch, per_batch, counter};
  const double max_steps = 30.0 * static_cast<double>(n) + 30;
  hlo::RegionRef cond = b.region(state, [&](Builder& r, const std::vector<Value>& s) {
    Value open = r.compare(s[2], r.full(1, per_batch), "GT");
    Value any = r.reduce(open, r.constant(0, DType::Bool), {0}, "stablehlo.or");
    return std::vector<Value>{op(r, "and", any, r.compare(s[4], r.constant(max_steps, DType::I32), "LT"))};
  });
  hlo::RegionRef body = b.region(state, [&](Builder& r, const std::vector<Value>& s) {
    Value hh = s[0], zz = s[1], m = s[2], stalled = s[3];
    Value one = r.full(1, per_batch), two = r.full(2, per_batch);
    Value open = r.compare(m, one, "GT");
    Value last = r.sub(m, one), before = r.select(open, r.sub(m, two), r.zeros(per_batch));
    last = r.select(open, last, r.zeros(per_batch));
    Value a = element_at(r, hh, before, before), bb = element_at(r, hh, before, last);
    Value c = element_at(r, hh, last, before), d = element_at(r, hh, last, last);
    // Wilkinson's shift: the eigenvalue of the trailing 2x2 block nearer its last entry.
    Value half = r.full(0.5, r.type(a));
    Value mean = r.mul(half, r.add(a, d)), gap = r.mul(half, r.sub(a, d));
    Value root = op(r, "sqrt", r.add(r.mul(gap, gap), r.mul(bb, c)));
    Value first_root = r.add(mean, root), second_root = r.sub(mean, root);
    Value shift = r.select(r.compare(magnitude(r, r.sub(first_root, d)), magnitude(r, r.sub(second_root, d)), "LE"),
                           first_root, second_root);
    Value tenth = op(r, "remainder", r.add(stalled, one), r.full(10, per_batch));
    Value exceptional = r.compare(tenth, r.zeros(per_batch), "EQ");
    Value kick = r.add(d, as_complex(r, r.mul(r.full(1.5, {real, {batch}}), magnitude(r, c)), dtype));
    shift = r.select(exceptional, kick, shift);
    // H - shift I on the active block's diagonal.
    TensorType index{DType::I32, dims};
    Value rows = r.iota(index, 1), cols = r.iota(index, 2);
    Value active_diagonal = op(r, "and", r.compare(rows, cols, "EQ"),
                               r.compare(rows, r.broadcast_in_dim(m, dims, {0}), "LT"));
    Value shift_matrix = r.select(active_diagonal, r.broadcast_in_dim(shift, dims, {0}), r.zeros(r.type(hh)));
    hh = r.sub(hh, shift_matrix);
    // Left rotations (QR), sequentially over k; cosines [B, n] (real) and sines [B, n] kept.
    TensorType rotation_c{real, {batch, n}}, rotation_s{dtype, {batch, n}};
    std::vector<TensorType> left_state{r.type(hh), rotation_c, rotation_s, counter};
    hlo::RegionRef left_cond = r.region(left_state, [&](Builder& q, const std::vector<Value>& t) {
      return std::vector<Value>{q.compare(t[3], q.constant(static_cast<double>(n - 1), DType::I32), "LT")};
    });
    hlo::RegionRef left_body = r.region(left_state, [&](Builder& q, const std::vector<Value>& t) {
      Value x = t[0], k = t[3];
      Value pair = pair_at(q, x, k, 1);  // rows k, k+1: [B, 2, n]
      Value kk = q.broadcast_to(k, {batch});
      Value top = element_at(q, x, kk, kk), low = element_at(q, x, q.add(kk, q.full(1, per_batch)), kk);
      Value top_size = magnitude(q, top), low_size = magnitude(q, low);
      Value norm = op(q, "sqrt", q.add(q.mul(top_size, top_size), q.mul(low_size, low_size)));
      Value rotate = op(q, "and", q.compare(q.add(kk, q.full(1, per_batch)), m, "LT"),
                        q.compare(norm, q.zeros(q.type(norm)), "GT"));
      Value safe_norm = q.select(rotate, norm, q.full(1, q.type(norm)));
      Value cosine = q.select(rotate, q.div(top_size, safe_norm), q.full(1, q.type(norm)));
      Value sine = q.div(q.mul(unit_phase(q, top), conjugate(q, low)), as_complex(q, safe_norm, dtype));
      sine = q.select(rotate, sine, q.zeros(q.type(top)));
      Dims pair_dims{batch, 1, n};
      Value cb = as_complex(q, q.broadcast_in_dim(cosine, pair_dims, {0}), dtype);
      Value sb = q.broadcast_in_dim(sine, pair_dims, {0});
      Value row_k = part_of_pair(q, pair, 0, 1), row_next = part_of_pair(q, pair, 1, 1);
      Value new_k = q.add(q.mul(cb, row_k), q.mul(sb, row_next));
      Value new_next = q.sub(q.mul(cb, row_next), q.mul(conjugate(q, sb), row_k));
      x = set_pair_at(q, x, q.concatenate({new_k, new_next}, 1), k, 1);
      Value zero = q.constant(0, DType::I32);
      Value cs = q.dynamic_update_slice(t[1], q.reshape(cosine, {batch, 1}), {zero, k});
      Value ss = q.dynamic_update_slice(t[2], q.reshape(sine, {batch, 1}), {zero, k});
      return std::vector<Value>{x, cs, ss, q.add(k, q.constant(1, DType::I32))};
    });
    std::vector<Value> left = r.op("stablehlo.while",
                                   {hh, r.full(1, rotation_c), r.zeros(rotation_s), r.constant(0, DType::I32)},
                                   left_state, "", {left_cond, left_body});
    // Right rotations (RQ) on H and Z, in the same order.
    std::vector<TensorType> right_state{r.type(hh), r.type(zz), counter};
    hlo::RegionRef right_cond = r.region(right_state, [&](Builder& q, const std::vector<Value>& t) {
      return std::vector<Value>{q.compare(t[2], q.constant(static_cast<double>(n - 1), DType::I32), "LT")};
    });
    hlo::RegionRef right_body = r.region(right_state, [&](Builder& q, const std::vector<Value>& t) {
      Value k = t[2], zero = q.constant(0, DType::I32);
      Value cosine = q.reshape(q.dynamic_slice(left[1], {zero, k}, {batch, 1}), {batch});
      Value sine = q.reshape(q.dynamic_slice(left[2], {zero, k}, {batch, 1}), {batch});
      Dims pair_dims{batch, n, 1};
      Value cb = as_complex(q, q.broadcast_in_dim(cosine, pair_dims, {0}), dtype);
      Value sb = q.broadcast_in_dim(sine, pair_dims, {0});
      auto rotate_columns = [&](Value x) {
        Value pair = pair_at(q, x, k, 2);
        Value col_k = part_of_pair(q, pair, 0, 2), col_next = part_of_pair(q, pair, 1, 2);
        Value new_k = q.add(q.mul(cb, col_k), q.mul(conjugate(q, sb), col_next));
        Value new_next = q.sub(q.mul(cb, col_next), q.mul(sb, col_k));
        return set_pair_at(q, x, q.concatenate({new_k, new_next}, 2), k, 2);
      };
      return std::vector<Value>{rotate_columns(t[0]), rotate_columns(t[1]), q.add(k, q.constant(1, DType::I32))};
    });
    std::vector<Value> right = r.op("stablehlo.while", {left[0], zz, r.constant(0, DType::I32)}, right_state, "",
                                    {right_cond, right_body});
    hh = r.add(right[0], shift_matrix);
    zz = right[1];
    // Deflation: the last row of the active block has converged when its subdiagonal entry is
    // negligible beside its neighbours on the diagonal.
    Value sub = magnitude(r, element_at(r, hh, last, before));
    Value scale = r.add(magnitude(r, element_at(r, hh, last, last)), magnitude(r, element_at(r, hh, before, before)));
    Value converged = op(r, "and", open,
                         op(r, "or", r.compare(sub, r.mul(r.full(eps, r.type(scale)), scale), "LE"),
                            r.compare(sub, r.full(smallest_normal(real), r.type(sub)), "LE")));
    Value clear = op(r, "and", r.broadcast_in_dim(converged, dims, {0}),
                     op(r, "and", r.compare(rows, r.broadcast_in_dim(last, dims, {0}), "EQ"),
                        r.compare(cols, r.broadcast_in_dim(before, dims, {0}), "EQ")));
    hh = r.select(clear, r.zeros(r.type(hh)), hh);
    m = r.select(converged, r.sub(m, one), m);
    stalled = r.select(converged, r.zeros(per_batch), r.add(stalled, one));
    return std::vector<Value>{hh, zz, m, stalled, r.add(s[4], r.constant(1, DType::I32))};
  });
  std::vector<Value> loop = b.op("stablehlo.while",
                                 {h, z, b.full(static_cast<double>(n), per_batch), b.zeros(per_batch),
                                  b.constant(0, DType::I32)},
                                 state, "", {cond, body});
  TensorType index{DType::I32, dims};
  Value upper = b.compare(b.iota(index, 2), b.iota(index, 1), "GE");
  return {b.select(upper, loop[0], b.zeros(b.type(h))), loop[1]};
}

// The eigenvectors of upper triangular T [B, n, n] (column k: T's k-th eigenvector, 1 at k, 0
// below), by back substitution over the rows, every column at once.
Value triangular_eigenvectors(Builder& b, Value t) {
  const Dims& dims = b.dims(t);
  int64_t batch = dims[0], n = dims[1];
  DType dtype = b.dtype(t), real = complex_part_dtype(dtype);
  TensorType index{DType::I32, dims};
  Value diagonal_mask = b.compare(b.iota(index, 1), b.iota(index, 2), "EQ");
  Value diagonal = b.reduce(b.select(diagonal_mask, t, b.zeros(b.type(t))), b.zeros({dtype, {}}), {1},
                            "stablehlo.add");  // [B, n]
  // LAPACK's trevc replaces a difference of eigenvalues smaller than this by it.
  Value largest = b.reduce(magnitude(b, t), b.constant(0, real), {1, 2}, "stablehlo.maximum");
  Value smallest = b.mul(b.full(machine_epsilon(real), b.type(largest)), largest);
  smallest = op(b, "maximum", smallest, b.full(smallest_normal(real) / machine_epsilon(real),
                                              b.type(smallest)));
  Value y = identity_matrices(b, b.type(t));
  if (n < 2) return y;
  TensorType counter{DType::I32, {}};
  std::vector<TensorType> state{b.type(y), counter};
  hlo::RegionRef cond = b.region(state, [&](Builder& r, const std::vector<Value>& s) {
    return std::vector<Value>{r.compare(s[1], r.constant(0, DType::I32), "GE")};
  });
  hlo::RegionRef body = b.region(state, [&](Builder& r, const std::vector<Value>& s) {
    Value i = s[1], zero = r.constant(0, DType::I32);
    Value row = r.dynamic_slice(t, {zero, i, zero}, {batch, 1, n});  // T[i, :]
    TensorType row_index{DType::I32, {batch, 1, n}};
    Value columns = r.iota(row_index, 2), ii = r.broadcast_to(i, {batch, 1, n});
    Value right_of = r.compare(columns, ii, "GT");
    Value sum = batched_product(r, r.select(right_of, row, r.zeros(r.type(row))), s[0]);  // [B, 1, n]
    Value t_ii = r.dynamic_slice(row, {zero, zero, i}, {batch, 1, 1});
    Value difference = r.sub(r.broadcast_to(t_ii, {batch, 1, n}), r.reshape(diagonal, {batch, 1, n}));
    Value floor = r.broadcast_in_dim(smallest, {batch, 1, n}, {0});
    difference = r.select(r.compare(magnitude(r, difference), floor, "LT"), as_complex(r, floor, dtype), difference);
    Value solved = op(r, "negate", r.div(sum, difference));
    Value new_row = r.select(right_of, solved,
                             r.select(r.compare(columns, ii, "EQ"), r.full(1, r.type(row)), r.zeros(r.type(row))));
    return std::vector<Value>{r.dynamic_update_slice(s[0], new_row, {zero, i, zero}),
                              r.sub(i, r.constant(1, DType::I32))};
  });
  return b.op("stablehlo.while", {y, b.constant(static_cast<double>(n - 2), DType::I32)}, state, "", {cond, body})[0];
}

// Each column of v [B, n, n] scaled to unit norm with its largest component real and positive
// (the first of equal largest ones), as geev returns them.
Value normalized_as_lapack(Builder& b, Value v) {
  const Dims& dims = b.dims(v);
  DType dtype = b.dtype(v), real = complex_part_dtype(dtype);
  Value size = magnitude(b, v), squares = b.mul(size, size);
  Value norm = op(b, "sqrt", b.reduce(squares, b.constant(0, real), {1}, "stablehlo.add"));  // [B, n]
  Value largest = b.reduce(squares, b.constant(0, real), {1}, "stablehlo.maximum");
  TensorType index{DType::I32, dims};
  Value rows = b.iota(index, 1);
  Value at_largest = b.compare(squares, b.broadcast_in_dim(largest, dims, {0, 2}), "EQ");
  Value first_row = b.reduce(b.select(at_largest, rows, b.full(static_cast<double>(dims[1]), index)),
                             b.constant(static_cast<double>(dims[1]), DType::I32), {1}, "stablehlo.minimum");
  Value pick = b.compare(rows, b.broadcast_in_dim(first_row, dims, {0, 2}), "EQ");
  Value component = b.reduce(b.select(pick, v, b.zeros(b.type(v))), b.zeros({dtype, {}}), {1}, "stablehlo.add");
  Value scale = b.div(conjugate(b, unit_phase(b, component)), as_complex(b, positive_or_one(b, norm), dtype));
  Value scaled = b.mul(v, b.broadcast_in_dim(scale, dims, {0, 2}));
  // The picked component exactly real, as geev sets it.
  Value real_only = as_complex(b, real_part(b, scaled), dtype);
  return b.select(pick, real_only, scaled);
}

struct GeneralEigen {
  Value values, vectors;  // [B, n] and [B, n, n], complex
};

GeneralEigen general_eigen(Context& ctx, Value a, bool vectors) {
  Builder& b = ctx.b;
  DType dtype = b.dtype(a);
  DType complex = dtype == DType::F32 ? DType::C64 : dtype == DType::F64 ? DType::C128 : dtype;
  if (complex != DType::C64 && complex != DType::C128) throw Unsupported(ctx.op + " in " + mlir_name(dtype));
  const Dims& dims = b.dims(a);
  int64_t n = dims.back(), batch = numel(matrix_batch(dims));
  Value x = b.reshape(is_complex(dtype) ? a : as_complex(b, a, complex), {batch, n, n});
  auto [h, z] = hessenberg(b, x);
  auto [t, q] = schur_form(b, h, z);
  TensorType index{DType::I32, b.dims(t)};
  Value diagonal = b.reduce(b.select(b.compare(b.iota(index, 1), b.iota(index, 2), "EQ"), t, b.zeros(b.type(t))),
                            b.zeros({complex, {}}), {1}, "stablehlo.add");
  GeneralEigen result{diagonal, Value()};
  if (vectors) result.vectors = normalized_as_lapack(b, batched_product(b, q, triangular_eigenvectors(b, t)));
  return result;
}

Dims square_operand(Context& ctx, Value a) {
  Dims dims = ctx.b.dims(a);
  if (dims.size() < 2 || dims.back() != dims[dims.size() - 2]) throw Unsupported(ctx.op + " of a non-square matrix");
  return dims;
}

// linalg_eig(A) -> (eigenvalues [..., n], eigenvectors [..., n, n]).
std::vector<Value> lower_linalg_eig(Context& ctx) {
  Builder& b = ctx.b;
  Value a = ctx.tensor(0);
  Dims dims = square_operand(ctx, a);
  if (numel(dims) == 0) return {b.zeros(ctx.out_type(0)), b.zeros(ctx.out_type(1))};
  GeneralEigen e = general_eigen(ctx, a, true);
  return {b.reshape(e.values, ctx.outputs[0].dims), b.reshape(e.vectors, ctx.outputs[1].dims)};
}

// _linalg_eigvals(A) -> eigenvalues.
std::vector<Value> lower_linalg_eigvals(Context& ctx) {
  Builder& b = ctx.b;
  Value a = ctx.tensor(0);
  Dims dims = square_operand(ctx, a);
  if (numel(dims) == 0) return {b.zeros(ctx.out_type(0))};
  return {b.reshape(general_eigen(ctx, a, false).values, ctx.outputs[0].dims)};
}

}  // namespace

TPU_LOWERING("linalg_eig", lower_linalg_eig);
TPU_LOWERING("_linalg_eigvals", lower_linalg_eigvals);

}  // namespace tpu::lowering
