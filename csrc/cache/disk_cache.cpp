#include "cache/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "cache/entry_file.h"
#include "cache/program_cache.h"
#include "cache/stable_hash.h"

namespace tpu::cache {

namespace {

std::atomic<WarningHandler> g_warning_handler{nullptr};

constexpr int64_t kDefaultMaxBytes = int64_t{2} << 30;
constexpr const char* kEntrySuffix = ".tpuexec";
constexpr size_t kEntryNameSize = 16 + 8;  // hex digits + suffix
// A temporary file this old belongs to a writer that died; younger ones may still be renamed.
constexpr int64_t kStaleTemporarySeconds = 3600;

bool is_entry_name(const std::string& name) {
  if (name.size() != kEntryNameSize || name.compare(16, std::string::npos, kEntrySuffix) != 0) return false;
  return std::all_of(name.begin(), name.begin() + 16,
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool is_temporary_name(const std::string& name) {
  return name.size() > 4 && name[0] == '.' && name.find(kEntrySuffix) != std::string::npos &&
         name.compare(name.size() - 4, 4, ".tmp") == 0;
}

struct FileInfo {
  std::string name;
  int64_t bytes = 0;
  int64_t mtime_ns = 0;
  bool temporary = false;
};

std::vector<FileInfo> list_files(const std::string& directory) {
  std::vector<FileInfo> files;
  DIR* dir = opendir(directory.c_str());
  if (!dir) return files;
  int dir_fd = dirfd(dir);
  while (dirent* item = readdir(dir)) {
    std::string name = item->d_name;
    bool entry = is_entry_name(name);
    if (!entry && !is_temporary_name(name)) continue;
    struct stat info;
    if (fstatat(dir_fd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
    FileInfo file;
    file.name = name;
    file.bytes = static_cast<int64_t>(info.st_size);
    file.mtime_ns = static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
    file.temporary = !entry;
    files.push_back(std::move(file));
  }
  closedir(dir);
  return files;
}

// Also removes what a damaged "entry" may be: an empty directory in the entry's place.
bool remove_path(const std::string& path) {
  if (unlink(path.c_str()) == 0 || errno == ENOENT) return true;
  return rmdir(path.c_str()) == 0;
}

int make_directories(const std::string& path) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    std::string prefix = path.substr(0, slash);
    if (!prefix.empty() && mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return errno;
    if (slash == std::string::npos) break;
  }
  struct stat info;
  if (stat(path.c_str(), &info) != 0) return errno;
  return S_ISDIR(info.st_mode) ? 0 : ENOTDIR;
}

enum class ReadStatus { Ok, Missing, Failed };

ReadStatus read_file(const std::string& path, std::string& bytes, std::string& why) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return ReadStatus::Missing;
    why = std::string("unreadable (") + std::strerror(errno) + ")";
    return ReadStatus::Failed;
  }
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    close(fd);
    why = "unreadable (not a regular file)";
    return ReadStatus::Failed;
  }
  bytes.resize(static_cast<size_t>(info.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = read(fd, &bytes[done], bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      why = std::string("unreadable (") + std::strerror(errno) + ")";
      close(fd);
      return ReadStatus::Failed;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd);
  bytes.resize(done);  // a file that shrank meanwhile reads as truncated
  return ReadStatus::Ok;
}

std::string temporary_suffix() {
  static std::atomic<uint64_t> counter{0};
  // pid alone is not unique on a file system that several machines share.
  static const uint64_t process_nonce = [] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }();
  return "." + std::to_string(getpid()) + "-" + hex64(process_nonce) + "-" + std::to_string(counter++) + ".tmp";
}

// Readers see the old entry, the new one, or none; never a partial file, because the bytes reach
// the final name only by rename() from a file in the same directory. No fsync: a torn file after
// a power loss fails its checksum and is recompiled. Returns 0 or an errno.
int write_atomically(const std::string& directory, const std::string& name, const std::string& bytes) {
  std::string temporary = directory + "/." + name + temporary_suffix();
  int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int error = errno;
      close(fd);
      unlink(temporary.c_str());
      return error;
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0) {
    int error = errno;
    unlink(temporary.c_str());
    return error;
  }
  if (rename(temporary.c_str(), (directory + "/" + name).c_str()) != 0) {
    int error = errno;
    unlink(temporary.c_str());
    return error;
  }
  return 0;
}

struct Eviction {
  int64_t removed = 0;
  int64_t remaining_bytes = 0;
};

Eviction evict(const std::string& directory, int64_t max_bytes) {
  Eviction result;
  std::vector<FileInfo> entries;
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  for (auto& file : list_files(directory)) {
    if (!file.temporary) {
      result.remaining_bytes += file.bytes;
      entries.push_back(std::move(file));
    } else if (now_ns - file.mtime_ns > kStaleTemporarySeconds * 1000000000) {
      unlink((directory + "/" + file.name).c_str());
    }
  }
  if (result.remaining_bytes <= max_bytes) return result;
  std::sort(entries.begin(), entries.end(),
            [](const FileInfo& a, const FileInfo& b) { return a.mtime_ns < b.mtime_ns; });
  for (const auto& entry : entries) {
    if (result.remaining_bytes <= max_bytes) break;
    // Another process may have evicted it first: it is gone either way.
    if (unlink((directory + "/" + entry.name).c_str()) == 0 || errno == ENOENT) {
      result.remaining_bytes -= entry.bytes;
      ++result.removed;
    }
  }
  return result;
}

}  // namespace

void set_warning_handler(WarningHandler handler) { g_warning_handler = handler; }

void warn(const std::string& message) {
  if (WarningHandler handler = g_warning_handler.load()) {
    handler(message);
  } else {
    std::fprintf(stderr, "torch_tpu warning: %s\n", message.c_str());
  }
}

std::string directory_from_environment() {
  for (const char* name : {"TORCH_TPU_CACHE_DIR", "TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT"}) {
    if (const char* value = std::getenv(name)) return value;  // even "": that turns the cache off
  }
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return std::string(xdg) + "/torch_tpu";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.cache/torch_tpu";
  return "";
}

int64_t max_bytes_from_environment() {
  const char* value = std::getenv("TORCH_TPU_CACHE_MAX_BYTES");
  if (!value || !*value) return kDefaultMaxBytes;
  char* end = nullptr;
  long long bytes = std::strtoll(value, &end, 10);
  return (end && *end == '\0' && bytes > 0) ? static_cast<int64_t>(bytes) : kDefaultMaxBytes;
}

DirectoryUsage scan_directory(const std::string& directory) {
  DirectoryUsage usage;
  if (directory.empty()) return usage;
  for (const auto& file : list_files(directory)) {
    if (file.temporary) continue;
    ++usage.entries;
    usage.bytes += file.bytes;
  }
  return usage;
}

int64_t evict_until(const std::string& directory, int64_t max_bytes) {
  return directory.empty() ? 0 : evict(directory, max_bytes).removed;
}

int64_t clear_directory(const std::string& directory) {
  int64_t removed = 0;
  if (directory.empty()) return removed;
  for (const auto& file : list_files(directory)) {
    if (remove_path(directory + "/" + file.name) && !file.temporary) ++removed;
  }
  return removed;
}

std::string check_entry_file(const std::string& path) {
  std::string bytes, why;
  ReadStatus status = read_file(path, bytes, why);
  if (status == ReadStatus::Missing) return "missing";
  if (status == ReadStatus::Failed) return why;
  Program program;
  std::string executable;
  return decode_entry(bytes, "", program, executable);
}

DiskCache& DiskCache::get() {
  static DiskCache* cache = new DiskCache();  // never destroyed: ops may run during exit
  return *cache;
}

DiskCache::DiskCache() : directory_(directory_from_environment()), max_bytes_(max_bytes_from_environment()) {
  while (directory_.size() > 1 && directory_.back() == '/') directory_.pop_back();
  // A process that injects compile failures (the executor's test hook) must compile: a program
  // loaded from the directory would skip the fault it is testing.
  const char* injected = std::getenv("TORCH_TPU_INJECT_COMPILE_FAILURE");
  if (injected && *injected) directory_.clear();
  if (directory_.empty()) return;
  if (int error = make_directories(directory_)) {
    warn("torch_tpu: the compilation cache directory " + directory_ + " cannot be used (" +
         std::strerror(error) +
         "), so compiled programs are kept in memory only. Set TORCH_TPU_CACHE_DIR to a writable "
         "directory, or to the empty string to turn the disk cache off.");
    return;
  }
  estimated_bytes_ = scan_directory(directory_).bytes;
  readable_ = true;
  writable_ = true;
}

std::string DiskCache::full_key(const KeyContext& context, const std::string& program_key) {
  return encode_key_prefix(context) + program_key;
}

std::string DiskCache::key_prefix() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (key_prefix_.empty()) {
    KeyContext context = current_key_context();
    context.salt = salt_;
    key_prefix_ = encode_key_prefix(context);
  }
  return key_prefix_;
}

void DiskCache::set_salt(const std::string& salt) {
  std::lock_guard<std::mutex> lock(mutex_);
  salt_ = salt;
  key_prefix_.clear();
}

std::string DiskCache::entry_path(const std::string& full_key) const {
  return directory_ + "/" + entry_file_name(full_key);
}

void DiskCache::discard_damaged(const std::string& path, const std::string& reason) {
  remove_path(path);
  ++damaged_;
  if (!warned_damaged_.exchange(true)) {
    warn("torch_tpu: the compilation cache entry " + path + " was " + reason +
         "; it was deleted and its program is compiled again (later damaged entries are replaced "
         "without a warning; torch_tpu.cache_stats() counts them).");
  }
}

void DiskCache::stop_writing(const std::string& why) {
  if (!writable_.exchange(false)) return;
  warn("torch_tpu: cannot write to the compilation cache directory " + directory_ + " (" + why +
       "), so newly compiled programs are kept in memory only; entries already there are still used.");
}

std::shared_ptr<Program> DiskCache::load(const std::string& program_key) {
  if (!readable_) return nullptr;
  const auto start = std::chrono::steady_clock::now();
  const std::string full = key_prefix() + program_key;
  const std::string path = entry_path(full);
  std::string bytes, why;
  switch (read_file(path, bytes, why)) {
    case ReadStatus::Missing:
      return nullptr;
    case ReadStatus::Failed:
      discard_damaged(path, why);
      return nullptr;
    case ReadStatus::Ok:
      break;
  }
  auto program = std::make_shared<Program>();
  std::string executable;
  why = decode_entry(bytes, full, *program, executable);
  if (!why.empty()) {
    discard_damaged(path, why);
    return nullptr;
  }
  try {
    program->executable = runtime::Client::get().deserialize(executable);
  } catch (const std::exception& e) {
    discard_damaged(path, std::string("rejected by the PJRT plugin (") + e.what() + ")");
    return nullptr;
  }
  // The mtime is the LRU clock that eviction reads; in a read-only directory it just stays.
  utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
  load_microseconds_ += std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::steady_clock::now() - start)
                            .count();
  return program;
}

void DiskCache::store(const std::string& program_key, const Program& program) {
  if (!writable_ || !serializable_ || !program.executable) return;
  std::string executable;
  try {
    executable = program.executable->serialize();
  } catch (const std::exception&) {
    executable.clear();
  }
  if (executable.empty()) {
    if (serializable_.exchange(false)) {
      warn("torch_tpu: the PJRT plugin (" + runtime::Client::get().platform() +
           ") cannot serialize executables, so the compilation cache keeps programs in memory only.");
    }
    return;
  }
  const std::string full = key_prefix() + program_key;
  const std::string bytes = encode_entry(full, program, executable);
  const std::string name = entry_file_name(full);
  int error = write_atomically(directory_, name, bytes);
  if (error == ENOENT && make_directories(directory_) == 0) {  // someone removed the directory
    error = write_atomically(directory_, name, bytes);
  }
  if (error == EEXIST) return;  // a temporary name clash: skip this one entry
  if (error != 0) {
    stop_writing(std::strerror(error));
    return;
  }
  ++writes_;
  bool over_cap;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    estimated_bytes_ += static_cast<int64_t>(bytes.size());
    over_cap = estimated_bytes_ > max_bytes_;
  }
  if (!over_cap) return;
  // Down to 90%, so that the next few writes do not each rescan the directory.
  Eviction eviction = evict(directory_, max_bytes_ / 10 * 9);
  evicted_ += eviction.removed;
  std::lock_guard<std::mutex> lock(mutex_);
  estimated_bytes_ = eviction.remaining_bytes;
}

DiskCache::Counters DiskCache::counters() const {
  Counters c;
  c.writes = writes_;
  c.damaged = damaged_;
  c.evicted = evicted_;
  c.load_seconds = static_cast<double>(load_microseconds_.load()) / 1e6;
  return c;
}

}  // namespace tpu::cache
