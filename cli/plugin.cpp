#include "plugin.h"

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <set>

namespace attncheck::cli {

namespace fs = std::filesystem;

std::string builtin_plugin_path() {
  // Next to the executable first (an installed or copied build), then where the build put it.
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path beside = exe.parent_path() / "impl" / "libattncheck_builtin.so";
    if (fs::exists(beside, ec)) return beside.string();
  }
  return ATTNCHECK_BUILTIN_PLUGIN;
}

Plugin::Plugin(const std::string &path) : path_(path == "builtin" ? builtin_plugin_path() : path) {
  std::error_code ec;
  if (!fs::exists(path_, ec))
    throw PluginError("plugin '" + path_ + "' does not exist: pass the path of a shared object (.so) or 'builtin'");
  if (fs::is_directory(path_, ec))
    throw PluginError("plugin '" + path_ + "' is a directory: pass the path of a shared object (.so)");
  // dlopen needs a slash to load a file rather than search the library path.
  std::string open_path = path_;
  if (open_path.find('/') == std::string::npos) open_path.insert(0, "./");
  handle_ = dlopen(open_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char *why = dlerror();
    throw PluginError("cannot load plugin '" + path_ + "': " + std::string(why ? why : "dlopen failed") +
                      " (is it a shared object built for this machine?)");
  }
  dlerror();
  // The message is built before dlclose: it may quote the plugin's own strings.
  auto fail = [&](const std::string &msg) {
    dlclose(handle_);
    handle_ = nullptr;
    throw PluginError(msg);
  };
  auto fn = reinterpret_cast<attncheck_kernels_fn>(dlsym(handle_, ATTNCHECK_KERNELS_SYMBOL));
  if (!fn)
    fail("plugin '" + path_ + "' does not export '" ATTNCHECK_KERNELS_SYMBOL
         "': define `const attncheck_kernel *attncheck_kernels(int32_t *count)` with C linkage");
  std::int32_t n = 0;
  const attncheck_kernel *ks = fn(&n);
  if (!ks || n <= 0)
    fail("plugin '" + path_ + "' exports no kernels (attncheck_kernels returned " + std::to_string(n) + " kernels)");
  std::set<std::string> names;
  for (std::int32_t i = 0; i < n; ++i) {
    const attncheck_kernel &k = ks[i];
    const std::string name = k.name ? k.name : "";
    if (k.abi_version != ATTNCHECK_ABI_VERSION)
      fail("plugin '" + path_ + "': kernel '" + name + "' has ABI version " + std::to_string(k.abi_version) +
           ", this attncheck speaks version " + std::to_string(ATTNCHECK_ABI_VERSION) +
           ": rebuild the plugin against this kernel_abi.h");
    if (name.empty() || !k.forward || !names.insert(name).second)
      fail("plugin '" + path_ + "': kernel #" + std::to_string(i) +
           (name.empty() ? " has no name" : !k.forward ? " ('" + name + "') has no forward"
                                                       : " repeats the name '" + name + "'") +
           ": every kernel needs a unique name and a forward function");
  }
  kernels_ = ks;
  count_ = static_cast<std::size_t>(n);
}

Plugin::~Plugin() {
  if (handle_) dlclose(handle_);
}

const attncheck_kernel &Plugin::find(const std::string &name) const {
  std::string known;
  for (const attncheck_kernel &k : kernels()) {
    if (name == k.name) return k;
    known += (known.empty() ? "" : ", ") + std::string(k.name);
  }
  throw PluginError("no kernel named '" + name + "' in plugin '" + path_ + "'; it has: " + known);
}

}  // namespace attncheck::cli
