#include "kernel_loader.h"

#include <filesystem>
#include <iostream>
#include <memory>

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

KernelLoader::KernelLoader(const reporting::KernelSource &source, const LoaderOptions &options) : source_(source) {
  using Kind = reporting::KernelSource::Kind;
  if (source.kind == Kind::python)
    throw LoaderError("the kernel is the Python function " + source.location +
                      ", checked in process: replay it from Python, attncheck.Report.load(PATH).replay(fn)");
  try {
    if (source.kind == Kind::exec) {
      ExecOptions eo;
      eo.call_timeout = options.call_timeout;
      eo.first_call_timeout = options.first_call_timeout;
      eo.memory_limit_mib = options.memory_limit_mib;
      // Until the hello succeeds the child's stderr is kept out of the terminal: a failed start is reported as one
      // line that already quotes it. Afterwards the kernel's diagnostics pass through.
      auto started = std::make_shared<bool>(false);
      eo.on_stderr = [started](std::string_view line) {
        if (*started) std::cerr << "[exec] " << line << '\n';
      };
      exec_ = std::make_unique<ExecKernel>(source.location, eo);
      *started = true;
      return;
    }
    sandbox::SandboxOptions so;
    so.timeout = options.call_timeout;
    so.memory_limit_mib = options.memory_limit_mib;
    const std::string path = source.kind == Kind::builtin ? builtin_plugin_path() : source.location;
    std::error_code ec;
    if (!fs::exists(path, ec))
      throw LoaderError("plugin '" + path + "' does not exist: pass the path of a shared object (.so) or 'builtin'");
    if (fs::is_directory(path, ec))
      throw LoaderError("plugin '" + path + "' is a directory: pass the path of a shared object (.so)");
    plugin_.emplace(sandbox::SandboxedPlugin::load(path, so));
  } catch (const sandbox::SandboxError &e) {
    throw LoaderError(e.what());
  } catch (const ExecError &e) {
    throw LoaderError(e.what());
  }
}

std::span<const attncheck_kernel> KernelLoader::kernels() const {
  return exec_ ? exec_->kernels() : plugin_->kernels();
}

std::optional<ExecKernel::CallTimes> KernelLoader::exec_call_times() const {
  if (!exec_) return std::nullopt;
  return exec_->call_times();
}

const std::string &KernelLoader::declared_contract(const attncheck_kernel &kernel) const {
  const std::span<const attncheck_kernel> ks = kernels();
  const auto index = static_cast<std::size_t>(&kernel - ks.data());
  if (index >= ks.size()) throw LoaderError(std::string("kernel '") + kernel.name + "' is not one of this source's");
  return exec_ ? exec_->contract(index) : plugin_->contract(index);
}

gate::Kernels KernelLoader::kernels_of_check(const std::string &name) const {
  gate::Kernels out{.list = {}, .declared = {}, .source = source_};
  if (name.empty())
    for (const attncheck_kernel &k : kernels()) out.list.push_back(&k);
  else
    out.list.push_back(&find(name));
  for (const attncheck_kernel *k : out.list) out.declared.push_back(declared_contract(*k));
  return out;
}

const attncheck_kernel &KernelLoader::find(const std::string &name) const {
  try {
    return exec_ ? exec_->find(name) : plugin_->find(name);
  } catch (const sandbox::SandboxError &e) {
    throw LoaderError(e.what());
  } catch (const ExecError &e) {
    throw LoaderError(e.what());
  }
}

}  // namespace attncheck::cli
