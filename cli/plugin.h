// Loading a kernel plugin: a shared object exporting attncheck_kernels() (spec/SPEC.md §3).
#pragma once

#include "attncheck/kernel_abi.h"

#include <span>
#include <stdexcept>
#include <string>

namespace attncheck::cli {

/// A configuration problem with the plugin; what() is one line saying what is wrong and what to do.
struct PluginError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Plugin {
 public:
  /// dlopen()s `path` ("builtin": the bundled kernels, libattncheck_builtin.so), finds attncheck_kernels and
  /// checks every kernel's abi_version, name and forward pointer. Throws PluginError.
  explicit Plugin(const std::string &path);
  ~Plugin();
  Plugin(const Plugin &) = delete;
  Plugin &operator=(const Plugin &) = delete;

  std::span<const attncheck_kernel> kernels() const { return {kernels_, count_}; }
  const std::string &path() const { return path_; }
  /// The kernel named `name`; throws PluginError listing the names there are.
  const attncheck_kernel &find(const std::string &name) const;

 private:
  std::string path_;
  void *handle_ = nullptr;
  const attncheck_kernel *kernels_ = nullptr;
  std::size_t count_ = 0;
};

/// Path of the bundled kernels' plugin.
std::string builtin_plugin_path();

}  // namespace attncheck::cli
