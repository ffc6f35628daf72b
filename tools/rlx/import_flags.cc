// --input-shape / --freeze: import an ONNX model for given input dims, with
// some inputs frozen to values, so that shape code and If conditions fold at
// import (run, inspect, compile).
#include <cstdlib>

#include "commands.h"

namespace rlx::cli {
namespace {

// "1,576" -> {"1", "576"}; "" -> {} (a scalar's dims).
std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> r;
  for (size_t at = 0; at < s.size();) {
    const size_t comma = std::min(s.find(',', at), s.size());
    r.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return r;
}

std::pair<std::string, std::string> split_spec(const std::string& spec, const char* flag,
                                               const char* example) {
  const size_t eq = spec.find('=');
  RLX_CHECK(eq != std::string::npos && eq > 0, flag, " '", spec, "': expected ", example);
  return {spec.substr(0, eq), spec.substr(eq + 1)};
}

}  // namespace

std::pair<std::string, Dims> parse_input_shape(const std::string& spec) {
  auto [name, rest] = split_spec(spec, "--input-shape", "NAME=D0,D1,... (e.g. x=32,2)");
  Dims dims;
  for (const std::string& d : split_commas(rest)) {
    RLX_CHECK(
        !d.empty() && d.find_first_not_of("0123456789") == std::string::npos && d.size() <= 12,
        "--input-shape '", spec, "': '", d, "' is not a dimension");
    dims.push_back(std::stoll(d));
  }
  return {name, dims};
}

void add_import_flags(CLI::App* cmd, ImportFlags& f, bool values_from_inputs) {
  cmd->add_option("--freeze", f.freeze,
                  values_from_inputs
                      ? "ONNX: NAME or NAME=V0,V1,...: freeze input NAME to its value in --inputs "
                        "(or the given one), so an If or shape code on it folds at import "
                        "(e.g. --freeze sr); repeatable"
                      : "ONNX: NAME=V0,V1,...: freeze input NAME to these values, so an If or "
                        "shape code on it folds at import (e.g. --freeze sr=16000); repeatable")
      ->take_all();
}

LoadOptions load_options(const ImportFlags& f, const std::vector<std::string>& input_shapes,
                         const TensorMap* inputs) {
  LoadOptions o;
  for (const std::string& spec : input_shapes) {
    auto [name, dims] = parse_input_shape(spec);
    o.input_shapes[name] = dims;
  }
  for (const std::string& spec : f.freeze) {
    const size_t eq = spec.find('=');
    const std::string name = spec.substr(0, eq);
    RLX_CHECK(!name.empty(), "--freeze '", spec, "': expected NAME or NAME=V0,V1,...");
    if (eq == std::string::npos) {
      RLX_CHECK(inputs, "--freeze '", spec, "': give the value, NAME=V0,V1,...");
      auto it = inputs->find(name);
      RLX_CHECK(it != inputs->end(), "--freeze ", name, ": no tensor of that name in --inputs");
      o.frozen_inputs[name] = it->second;
      continue;
    }
    std::vector<double> v;
    for (const std::string& e : split_commas(spec.substr(eq + 1))) {
      char* end = nullptr;
      const double x = std::strtod(e.c_str(), &end);
      RLX_CHECK(!e.empty() && end && *end == '\0', "--freeze '", spec, "': '", e,
                "' is not a number");
      v.push_back(x);
    }
    RLX_CHECK(!v.empty(), "--freeze '", spec, "': no values");
    // One value freezes a scalar; the importer reshapes to the declared dims.
    const Dims dims = v.size() == 1 ? Dims{} : Dims{int64_t(v.size())};
    o.frozen_inputs[name] = Tensor::from_vector<double>(dims, v, DType::F64);
  }
  return o;
}

}  // namespace rlx::cli
