#include "decode.h"

namespace attncheck::sandbox {

int decode_hello(const wire::Hello &hello) {
  if (hello.magic != wire::kMagic) throw DecodeError("sandbox: the server's first message is garbled");
  if (hello.count < 0) throw DecodeError(bounded(hello.error));
  if (hello.count == 0) throw DecodeError("exports no kernels (attncheck_kernels returned 0 kernels)");
  return hello.count;
}

KernelDesc decode_kernel_info(const wire::KernelInfo &info, int index) {
  const std::string contract_error = bounded(info.contract_error);
  if (!contract_error.empty()) throw DecodeError(contract_error);
  KernelDesc d{bounded(info.name), info.abi_version, info.has_forward != 0, info.has_backward != 0,
               info.has_last_error != 0, bounded(info.contract)};
  if (info.full_name_len < 0 || info.full_name_len >= wire::kNameBytes)
    throw DecodeError("kernel #" + std::to_string(index) + " has a name of " + std::to_string(info.full_name_len) +
                      " characters; the sandbox carries at most " + std::to_string(wire::kNameBytes - 1));
  if (info.full_contract_len < 0 || info.full_contract_len >= wire::kMessageBytes)
    throw DecodeError("kernel '" + d.name + "' declares a contract of " + std::to_string(info.full_contract_len) +
                      " characters; the sandbox carries at most " + std::to_string(wire::kMessageBytes - 1));
  return d;
}

std::string decode_reply_message(const wire::Reply &reply) {
  if (reply.magic != wire::kMagic || (reply.type != wire::kReturned && reply.type != wire::kSignalled))
    throw DecodeError("sandbox: the server's reply is garbled");
  return bounded(reply.message);
}

}  // namespace attncheck::sandbox
