// The calling thread's Python frames, read without taking the GIL. Recording an op in
// defer-and-fuse notes the user's line, and the op's binding has let the GIL go: taking it back
// for every op cost more than the rest of the location's work.
#pragma once

#include <Python.h>

namespace tpu::python {

// Fills `codes` and `instructions` (the byte offset PyCode_Addr2Line takes) with the thread's
// frames, innermost first, at most `max`; returns how many. -1 where this Python's frame layout
// is not known here (versions other than 3.11): the caller then takes the GIL and walks the
// frames through the public API. The code objects are borrowed: the frames hold them, and the
// frames stay as they are while this thread is inside the call that asked.
int frames_without_gil(PyCodeObject** codes, int* instructions, int max);

}  // namespace tpu::python
