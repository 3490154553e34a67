// The persistent half of the compilation cache: one file per executable in a directory that
// processes (and machines, on a shared file system) fill and read at the same time.
//
// Nothing here may fail an op: an entry that cannot be read is deleted and recompiled, a directory
// that cannot be written degrades the cache to memory, and each is said once, as a warning.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "cache/cache_key.h"

namespace tpu::cache {

struct Program;

// Torch-free code cannot raise Python warnings itself; the bindings install a handler. The
// cache and the executor both warn through here.
using WarningHandler = void (*)(const std::string& message);
void set_warning_handler(WarningHandler handler);
void warn(const std::string& message);

// The directory from TORCH_TPU_CACHE_DIR, else TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT, else
// $XDG_CACHE_HOME/torch_tpu or ~/.cache/torch_tpu; "" (set explicitly) turns the disk cache off.
std::string directory_from_environment();
int64_t max_bytes_from_environment();  // TORCH_TPU_CACHE_MAX_BYTES, default 2 GiB

struct DirectoryUsage {
  int64_t entries = 0;
  int64_t bytes = 0;
};
DirectoryUsage scan_directory(const std::string& directory);
// Deletes the least recently used entries (oldest mtime first) until at most `max_bytes` remain;
// returns how many it deleted. Only files named like our entries are touched.
int64_t evict_until(const std::string& directory, int64_t max_bytes);
// Deletes every entry (and leftover temporary file) of ours; other files stay.
int64_t clear_directory(const std::string& directory);
// Why the file at `path` is not a well-formed entry ("" when it is); the key is not checked.
std::string check_entry_file(const std::string& path);

class DiskCache {
 public:
  static DiskCache& get();

  // The program stored for `program_key` in this context, or null (also for damaged entries).
  std::shared_ptr<Program> load(const std::string& program_key);
  void store(const std::string& program_key, const Program& program);

  const std::string& directory() const { return directory_; }
  int64_t max_bytes() const { return max_bytes_; }
  bool writable() const { return writable_.load(); }
  // Stands in for a version change in tests: later lookups use another key.
  void set_salt(const std::string& salt);
  // The on-disk key of `program_key` under `context` (for tests of what the key covers).
  static std::string full_key(const KeyContext& context, const std::string& program_key);

  struct Counters {
    int64_t writes = 0;
    int64_t damaged = 0;
    int64_t evicted = 0;
    double load_seconds = 0;
  };
  Counters counters() const;

 private:
  DiskCache();
  // The key prefix of this process's context, computed at the first lookup (it needs the client).
  std::string key_prefix();
  std::string entry_path(const std::string& full_key) const;
  void discard_damaged(const std::string& path, const std::string& reason);
  void stop_writing(const std::string& why);

  std::string directory_;
  int64_t max_bytes_;
  std::atomic<bool> readable_{false};
  std::atomic<bool> writable_{false};
  std::atomic<bool> serializable_{true};
  std::atomic<bool> warned_damaged_{false};

  mutable std::mutex mutex_;
  std::string salt_;
  std::string key_prefix_;  // "" until computed
  int64_t estimated_bytes_ = 0;
  std::atomic<int64_t> writes_{0}, damaged_{0}, evicted_{0}, load_microseconds_{0};
};

}  // namespace tpu::cache
