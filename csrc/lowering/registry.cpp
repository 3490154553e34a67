#include "lowering/registry.h"

#include <algorithm>
#include <unordered_map>

namespace tpu::lowering {

namespace {
std::unordered_map<std::string, Entry>& table() {
  static std::unordered_map<std::string, Entry> entries;
  return entries;
}
}  // namespace

void register_lowering(const std::string& name, Lowering fn, bool random, bool checked) {
  table()[name] = Entry{fn, random, checked};
}

const Entry* find_lowering(const std::string& name) {
  auto& entries = table();
  auto it = entries.find(name);
  if (it != entries.end()) return &it->second;
  if (!name.empty() && name.back() == '_') {
    it = entries.find(name.substr(0, name.size() - 1));
    if (it != entries.end()) return &it->second;
  }
  return nullptr;
}

std::vector<std::string> lowered_op_names() {
  std::vector<std::string> names;
  for (const auto& [name, entry] : table()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

const Arg& Context::arg(size_t i) const {
  if (i >= args.size()) throw Unsupported(op + ": missing argument " + std::to_string(i));
  return args[i];
}

Value Context::tensor(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind != Arg::Kind::Tensor && a.kind != Arg::Kind::Number) {
    throw Unsupported(op + ": argument " + std::to_string(i) + " is not a tensor");
  }
  return a.value;
}

int64_t Context::int_arg(size_t i, int64_t fallback) const {
  if (i >= args.size() || args[i].is_none()) return fallback;
  if (args[i].kind == Arg::Kind::Bool) return args[i].b;
  if (args[i].kind != Arg::Kind::Int) throw Unsupported(op + ": argument is not an int");
  return args[i].i;
}

bool Context::bool_arg(size_t i, bool fallback) const {
  if (i >= args.size() || args[i].is_none()) return fallback;
  if (args[i].kind == Arg::Kind::Int) return args[i].i != 0;
  if (args[i].kind != Arg::Kind::Bool) throw Unsupported(op + ": argument is not a bool");
  return args[i].b;
}

}  // namespace tpu::lowering
