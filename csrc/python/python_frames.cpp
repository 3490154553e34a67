// Reads CPython's own frame records, whose layout is private and changes between versions: only
// the layout of the version compiled against is read, and only where it is known.
#include <patchlevel.h>
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define TPU_FRAME_LAYOUT_KNOWN 1
#define Py_BUILD_CORE 1
#endif
#include <Python.h>

#include "python/python_frames.h"

#ifdef TPU_FRAME_LAYOUT_KNOWN
#include <internal/pycore_frame.h>
#endif

namespace tpu::python {

#ifdef TPU_FRAME_LAYOUT_KNOWN
int frames_without_gil(PyCodeObject** codes, int* instructions, int max) {
  // The thread's state is kept per thread by the runtime and is readable without the GIL; a
  // thread that never ran Python has none, and then no frames.
  PyThreadState* thread = PyGILState_GetThisThreadState();
  if (thread == nullptr || thread->cframe == nullptr) return 0;
  int n = 0;
  for (_PyInterpreterFrame* frame = thread->cframe->current_frame; frame != nullptr && n < max;
       frame = frame->previous) {
    if (_PyFrame_IsIncomplete(frame)) continue;  // a call still setting up: not a line yet
    int last = _PyInterpreterFrame_LASTI(frame);
    codes[n] = frame->f_code;
    instructions[n] = last < 0 ? -1 : last * static_cast<int>(sizeof(_Py_CODEUNIT));
    ++n;
  }
  return n;
}
#else
int frames_without_gil(PyCodeObject**, int*, int) { return -1; }
#endif

}  // namespace tpu::python
