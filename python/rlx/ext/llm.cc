// rlx.LLM's native half: a GGUF language model's tokenizer, KV-cache session
// and sampler (include/rlx/llm.h, rlx/tokenizer.h), used the way `rlx
// generate` / `rlx tokenize` / `rlx run X.gguf --tokens` use them. The
// generation loop itself is in rlx/__init__.py, so Ctrl-C stops it between
// tokens and stream=True can yield.
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <mutex>

#include "bindings.h"
#include "convert.h"
#include "rlx/llm.h"
#include "rlx/tokenizer.h"

namespace rlx::python {
namespace {

class PyLLM {
 public:
  PyLLM(const std::string& path, bool dequantize)
      : path_(path),
        dequantize_(dequantize),
        file_(gguf::read(path)),
        config_(llm::Config::from_gguf(file_)),
        tok_(Tokenizer::from_gguf(file_)) {
    Model m = llm::build_model(file_, config_, {}, weights());
    session_ =
        std::make_unique<llm::Session>(Executable::compile(std::move(m.graph), m.weights), config_);
  }

  std::vector<int32_t> tokenize(const std::string& text, bool add_special,
                                bool parse_special) const {
    return tok_.encode(text, add_special, parse_special);
  }
  py::bytes detokenize(const std::vector<int32_t>& ids, bool render_special) const {
    return py::bytes(tok_.decode(ids, render_special));
  }
  py::bytes piece(int32_t id, bool special) const {
    return py::bytes(tok_.token_to_piece(id, special));
  }

  // Feeds tokens at positions n_past..; logits of the last one, [n_vocab].
  py::array feed(const std::vector<int32_t>& ids) {
    RLX_CHECK(!ids.empty(), "feed: no tokens");
    std::vector<float> logits;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mu_);
      logits = session_->feed(ids);
    }
    py::array_t<float> out(py::ssize_t(logits.size()));
    std::copy(logits.begin(), logits.end(), out.mutable_data());
    return out;
  }
  void reset() {
    std::lock_guard<std::mutex> lock(mu_);
    session_->reset();
  }
  int64_t n_past() const { return session_->n_past(); }

  // Logits of every token, [T, n_vocab], from the graph without a KV cache
  // (`rlx run X.gguf --tokens`), compiled on first use; independent of the
  // generation state.
  py::array logits(const std::vector<int32_t>& ids) {
    RLX_CHECK(!ids.empty(), "logits: no tokens");
    TensorMap out;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mu_);
      if (!all_logits_) {
        Model m =
            llm::build_model(file_, config_, {.kv_cache = false, .all_logits = true}, weights());
        all_logits_ = std::make_unique<Session>(Executable::compile(std::move(m.graph), m.weights));
      }
      out = all_logits_->run(llm::token_inputs(ids, 0, config_.n_vocab));
    }
    return to_numpy(out.at("logits"));
  }

  const llm::Config& config() const { return config_; }
  const Tokenizer& tokenizer() const { return tok_; }
  const std::string& path() const { return path_; }

 private:
  llm::Weights weights() const { return dequantize_ ? llm::Weights::F32 : llm::Weights::Quantized; }

  std::string path_;
  bool dequantize_;
  gguf::File file_;
  llm::Config config_;
  Tokenizer tok_;
  std::unique_ptr<llm::Session> session_;
  std::unique_ptr<Session> all_logits_;
  std::mutex mu_;
};

class PySampler {
 public:
  explicit PySampler(const llm::SamplerOptions& o) : sampler_(o) {}
  int32_t sample(const py::array_t<float, py::array::c_style | py::array::forcecast>& logits,
                 const std::vector<int32_t>& history) {
    RLX_CHECK(logits.ndim() == 1, "sample: logits must be 1-d, got ", logits.ndim(), " dims");
    std::span<const float> l(logits.data(), size_t(logits.size()));
    return sampler_.sample(l, history);
  }

 private:
  llm::Sampler sampler_;
};

}  // namespace

void bind_llm(py::module_& m) {
  py::class_<PyLLM>(m, "_LLM")
      .def(py::init([](const std::string& path, bool dequantize) {
             py::gil_scoped_release nogil;
             return std::make_unique<PyLLM>(path, dequantize);
           }),
           py::arg("path"), py::arg("dequantize") = false)
      .def("tokenize", &PyLLM::tokenize, py::arg("text"), py::arg("add_special"),
           py::arg("parse_special"))
      .def("detokenize", &PyLLM::detokenize, py::arg("ids"), py::arg("render_special"))
      .def("piece", &PyLLM::piece, py::arg("id"), py::arg("special"))
      .def("feed", &PyLLM::feed, py::arg("ids"))
      .def("reset", &PyLLM::reset)
      .def("logits", &PyLLM::logits, py::arg("ids"))
      .def_property_readonly("n_past", &PyLLM::n_past)
      .def_property_readonly("n_vocab", [](const PyLLM& l) { return l.config().n_vocab; })
      .def_property_readonly("n_ctx_train", [](const PyLLM& l) { return l.config().n_ctx_train; })
      .def_property_readonly("arch", [](const PyLLM& l) { return l.config().arch; })
      .def_property_readonly("summary", [](const PyLLM& l) { return l.config().summary(); })
      .def_property_readonly("path", &PyLLM::path)
      .def_property_readonly("bos", [](const PyLLM& l) { return l.tokenizer().bos(); })
      .def_property_readonly("eos", [](const PyLLM& l) { return l.tokenizer().eos(); })
      .def("is_eog", [](const PyLLM& l, int32_t id) { return l.tokenizer().is_eog(id); });

  py::class_<PySampler>(m, "_Sampler")
      .def(py::init([](float temperature, int top_k, float top_p, float min_p, float repeat_penalty,
                       int repeat_last_n, uint64_t seed) {
             return std::make_unique<PySampler>(llm::SamplerOptions{
                 .temperature = temperature,
                 .top_k = top_k,
                 .top_p = top_p,
                 .min_p = min_p,
                 .repeat_penalty = repeat_penalty,
                 .repeat_last_n = repeat_last_n,
                 .seed = seed,
             });
           }),
           py::arg("temperature"), py::arg("top_k"), py::arg("top_p"), py::arg("min_p"),
           py::arg("repeat_penalty"), py::arg("repeat_last_n"), py::arg("seed"))
      .def("sample", &PySampler::sample, py::arg("logits"), py::arg("history"));
}

}  // namespace rlx::python
