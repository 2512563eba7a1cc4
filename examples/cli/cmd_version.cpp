// `layerstream version`: the version and what this build contains.
#include <iostream>

#include "examples/cli/cli_common.h"
#include "layerstream/config.h"
#include "runtime/device/device.h"

namespace layerstream::cli {
namespace {

class VersionCommand : public Command {
 public:
  void setup(CLI::App& sub) override {
    add_json_flag(sub, json_path_);
  }
  int run() override {
    Status cuda = cuda_device_available();
    std::cout << "layerstream " << LAYERSTREAM_VERSION << "\n"
              << "cuda backend: " << (LAYERSTREAM_HAVE_CUDA ? "built" : "not built") << "\n"
              << "cuda device:  " << (cuda.ok() ? "available" : cuda.message()) << "\n";
    if (!json_path_.empty()) {
      nlohmann::json j = {{"version", LAYERSTREAM_VERSION},
                          {"cuda_built", static_cast<bool>(LAYERSTREAM_HAVE_CUDA)},
                          {"cuda_device", cuda.ok() ? "available" : cuda.message()}};
      if (Status s = write_json_file(json_path_, j); !s.ok()) return fail(s);
    }
    return kExitOk;
  }

 private:
  std::string json_path_;
};

}  // namespace
LS_REGISTER_COMMAND(VersionCommand, "version", "Print the version and the backends this build has");
}  // namespace layerstream::cli
