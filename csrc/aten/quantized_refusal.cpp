// Quantized tensors moved to tpu (quantize_per_tensor(...).to("tpu")) reach the
// QuantizedPrivateUse1 dispatch key first; without this the user would see "Could not run
// 'aten::empty_quantized' ..." from deep inside the dispatcher.
#include <torch/library.h>

namespace tpu::aten {
namespace {

void refuse_quantized(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, op.schema().name(), ": quantized tensors (torch.qint8, torch.quint8, "
                              "torch.qint32, ...) are not supported on the tpu device. Dequantize first "
                              "(q.dequantize().to(\"tpu\")), or keep quantized work on the CPU.");
}

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuse_quantized>());
}

}  // namespace
}  // namespace tpu::aten
