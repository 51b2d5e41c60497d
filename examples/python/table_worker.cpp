// table_worker.cpp - a C++ extension module (the half of
// examples/python/swap_while_allocating.py that is not Python).
//
// It is built the way any extension that must share the Python package's
// table is built: against tether.get_include() and linked to
// tether.get_library(). Its worker threads take the current resource from the
// table at every allocation - as a C++ library that asks "what should I
// allocate from?" would - while Python swaps the current resource on another
// thread. Each buffer frees into the resource it came from, so the swaps never
// misroute a free, and a resource Python has already replaced stays alive
// until the last buffer taken from it is gone.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstring>
#include <deque>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <tether/tether.hpp>

namespace {

struct Result {
  std::size_t allocations = 0;
  std::set<std::uintptr_t> resources_seen;  // handle values the table gave us
  std::string error;
};

// One worker: `iterations` allocations from whatever is current for `device`,
// each written, about `keep` of them alive at a time (freed oldest first).
void work(int device, long iterations, std::size_t keep, Result& out) {
  try {
    std::deque<tether::buffer> live;
    for (long i = 0; i < iterations; ++i) {
      tether::resource current = tether::current_resource(device);  // +1: a swap cannot free it
      out.resources_seen.insert(reinterpret_cast<std::uintptr_t>(current.get()));
      const std::size_t size = 256 + static_cast<std::size_t>((i * 7919) % 65536);
      tether::buffer b(current, size);
      if (device == tether::device_host) std::memset(b.data(), static_cast<int>(i & 0xff), size);
      live.push_back(std::move(b));
      if (live.size() > keep) live.pop_front();  // frees into the buffer's own resource
      ++out.allocations;
    }
  } catch (const tether::error& e) {
    out.error = e.what();
  }
}

// run(device, threads, iterations, keep) -> (allocations, distinct resources seen)
PyObject* run(PyObject*, PyObject* args) {
  int device = 0, threads = 0;
  long iterations = 0;
  Py_ssize_t keep = 0;
  if (!PyArg_ParseTuple(args, "iiln", &device, &threads, &iterations, &keep)) return nullptr;
  if (threads < 1 || iterations < 0 || keep < 0) {
    PyErr_SetString(PyExc_ValueError, "threads must be >= 1, iterations and keep >= 0");
    return nullptr;
  }
  std::vector<Result> results(static_cast<std::size_t>(threads));
  Py_BEGIN_ALLOW_THREADS  // Python keeps swapping resources meanwhile
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back(work, device, iterations, static_cast<std::size_t>(keep), std::ref(results[t]));
  for (auto& th : pool) th.join();
  Py_END_ALLOW_THREADS
  std::size_t total = 0;
  std::set<std::uintptr_t> seen;
  for (const Result& r : results) {
    if (!r.error.empty()) {
      PyErr_SetString(PyExc_RuntimeError, r.error.c_str());
      return nullptr;
    }
    total += r.allocations;
    seen.insert(r.resources_seen.begin(), r.resources_seen.end());
  }
  return Py_BuildValue("(nn)", static_cast<Py_ssize_t>(total), static_cast<Py_ssize_t>(seen.size()));
}

PyMethodDef methods[] = {
    {"run", run, METH_VARARGS,
     "run(device, threads, iterations, keep) -> (allocations, distinct resources seen): allocate from the "
     "current resource of `device` on `threads` C++ threads, each keeping `keep` buffers alive."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "table_worker",
                      "C++ threads that allocate from tether's current resource.", -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit_table_worker(void) { return PyModule_Create(&module); }
