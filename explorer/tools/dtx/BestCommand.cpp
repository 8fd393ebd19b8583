// `dtx best KERNEL --shape ..`: the best correct schedule known for a kernel at a shape (the
// full protocol's time where there is one), and with -o its generated module, for CI to import.
#include "Commands.h"
#include "RemoteClient.h"

#include <dtx/results/Store.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>

namespace dtx::cli {
namespace {

struct BestArgs {
  std::string db, kernel, shape, dtype = "float32", device, out;
  bool json = false;
  Remote remote;
};

int best_cmd(const BestArgs& a) {
  if (int rc = check_remote(a.remote)) return rc;
  ShapeSizes shape = parse_shape(a.shape);
  if (!a.remote.url.empty()) {
    try {
      return remote_best(a.remote, a.kernel, shape_text(shape), a.dtype, a.device, a.out, a.json);
    } catch (const std::exception& e) {
      std::cerr << "dtx: " << e.what() << "\n";
      return 1;
    }
  }
  std::unique_ptr<results::Store> store;
  try {
    store = results::Store::open_read_only(a.db); // it reads only: a read-only store will do
  } catch (const std::exception& e) {
    std::cerr << "dtx: " << e.what() << "\n";
    return 1;
  }
  results::Shape s(shape.begin(), shape.end());
  std::optional<std::string> device;
  if (!a.device.empty()) device = a.device;
  auto best = store->best(a.kernel, results::shape_key(s), a.dtype, device);
  if (!best) {
    std::cerr << "dtx: no correct schedule of `" << a.kernel << "` is known at "
              << results::shape_key(s) << " in " << a.dtype
              << (device ? " on a device matching `" + *device + "`" : std::string(""))
              << "; run `dtx explore` for it first\n";
    return 3;
  }
  if (!a.out.empty()) {
    std::ofstream o(a.out, std::ios::binary);
    o << best->module_source;
    if (!o) {
      std::cerr << "dtx: cannot write " << a.out << "\n";
      return 1;
    }
  }
  const auto& m = best->measurement;
  if (a.json) {
    nlohmann::json j = {{"kernel", best->kernel},
                        {"canonical", best->canonical},
                        {"schedule_id", best->schedule_id},
                        {"exploration", best->exploration_id},
                        {"code_hash", best->code_hash},
                        {"protocol", m.protocol},
                        {"device", m.env.device_name},
                        {"torch", m.env.torch},
                        {"triton", m.env.triton}};
    if (m.time_ms) j["time_ms"] = *m.time_ms;
    if (!a.out.empty()) j["module"] = a.out;
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << best->canonical << "\n";
    std::cerr << "dtx: " << (m.time_ms ? fmt_ms(*m.time_ms) + " ms" : m.status) << " ("
              << m.protocol << ") on " << m.env.device_name << ", exploration "
              << best->exploration_id << (a.out.empty() ? "" : "; module written to " + a.out)
              << "\n";
  }
  return 0;
}

} // namespace

Command add_best_command(CLI::App& app) {
  auto a = std::make_shared<BestArgs>();
  a->db = default_db();
  CLI::App* sub = app.add_subcommand(
      "best", "the best correct schedule known for a kernel at a shape; -o writes its module");
  sub->add_option("KERNEL", a->kernel, "the kernel's name (a template's `kernel:`)")
      ->required()
      ->check(kernel_name_check());
  sub->add_option("--shape", a->shape, "sizes by DT label: x=4096,y=4096")->required();
  sub->add_option("--dtype", a->dtype, "float32 (default), float16 or bfloat16")
      ->check(CLI::IsMember({"float32", "float16", "bfloat16"}));
  sub->add_option("--device", a->device, "only measurements on a device whose name contains this")
      ->check(non_empty_check());
  sub->add_option("-o,--output", a->out, "write the generated module here")
      ->check(output_file_check());
  sub->add_option("--db", a->db, "the results database (default $DTX_DB or ./dtx.db)")
      ->check(CLI::ExistingFile);
  sub->add_flag("--json", a->json, "print JSON");
  add_remote_options(*sub, a->remote);
  return {sub, [a] { return best_cmd(*a); }};
}

} // namespace dtx::cli
