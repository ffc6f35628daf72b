// rlx serve MODEL.gguf: an OpenAI-compatible HTTP server (/v1/completions,
// /v1/chat/completions with server-sent events, /v1/models, /health) over
// llm::Scheduler. HTTP is Debian's cpp-httplib; the server keeps no state
// between requests beyond its slots' caches, so several behind a load
// balancer scale out.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include <unistd.h>

#include "commands.h"
#include "rlx/llm_scheduler.h"
#include "serve_openai.h"

namespace rlx::cli {
namespace {

using serve::ApiError;
using serve::Endpoint;

struct ServeOptions {
  std::string model, host = "127.0.0.1", alias, chat_template;
  int port = 8080, parallel = 1, threads = 0;
  int64_t ctx = 0, max_tokens = 0;
  size_t queue = 8, max_body = 1 << 20;
  bool dequantize = false, no_batch = false;
  std::string kv_type = "f16";
};

std::atomic<bool> g_stop{false};
extern "C" void on_stop_signal(int) { g_stop = true; }

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(serve::dump(serve::error_body(e)), "application/json");
}

class Server {
 public:
  Server(const ServeOptions& o, const llm::ChatModel& model)
      : model_(model),
        model_id_(o.alias.empty() ? std::filesystem::path(o.model).stem().string() : o.alias),
        limits_{o.ctx, o.max_tokens},
        scheduler_(model, o.parallel, o.queue),
        created_(int64_t(std::time(nullptr))) {
    // One HTTP thread per request that may be in flight, and spares to turn
    // the rest away with 503 rather than leave them waiting for a thread.
    const size_t n_threads = size_t(o.parallel) + o.queue + 4;
    http_.new_task_queue = [n_threads] { return new httplib::ThreadPool(n_threads); };
    http_.set_payload_max_length(o.max_body);
    http_.set_read_timeout(std::chrono::seconds(30));
    http_.set_write_timeout(std::chrono::seconds(30));
    http_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const serve::json j{{"status", "ok"},
                          {"slots", scheduler_.n_slots()},
                          {"requests_in_flight", scheduler_.in_flight()}};
      res.set_content(serve::dump(j), "application/json");
    });
    http_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(serve::dump(serve::models_body(model_id_, created_)), "application/json");
    });
    http_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      complete(Endpoint::Completions, req, res);
    });
    http_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      complete(Endpoint::ChatCompletions, req, res);
    });
    // Every error the library makes itself (404, 413, ...) as an OpenAI error.
    http_.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      std::string message = res.status == 413   ? "the request body is too large"
                            : res.status == 404 ? "no route " + req.method + " " + req.path
                                                : "HTTP error " + std::to_string(res.status);
      send_error(res, ApiError{res.status, message, "invalid_request_error", "", ""});
    });
    http_.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
          std::string what = "internal error";
          try {
            std::rethrow_exception(ep);
          } catch (const std::exception& e) {
            what = e.what();
          } catch (...) {
          }
          send_error(res, ApiError{500, what, "server_error", "", ""});
        });
  }

  // Binds (port 0: any free port) and returns the port; throws when it cannot.
  int bind(const std::string& host, int port) {
    const int bound =
        port == 0 ? http_.bind_to_any_port(host) : (http_.bind_to_port(host, port) ? port : -1);
    RLX_CHECK(bound > 0, "serve: cannot listen on ", host, ":", port,
              " (in use, or not an address of this machine)");
    return bound;
  }

  const std::string& model_id() const { return model_id_; }

  // Serves until stop() (from the signal watcher).
  void listen() { http_.listen_after_bind(); }
  void stop() {
    http_.stop();
    scheduler_.stop();
  }

 private:
  void complete(Endpoint e, const httplib::Request& req, httplib::Response& res) {
    serve::ParsedRequest p;
    try {
      p = serve::parse_request(e, req.body, model_, model_id_, limits_);
    } catch (const ApiError& err) {
      return send_error(res, err);
    }
    std::shared_ptr<llm::Ticket> ticket = scheduler_.submit(std::move(p.generate));
    if (!ticket)
      return send_error(res,
                        ApiError{503, "the server is busy: every slot and queue place is taken",
                                 "server_error", "", "server_busy"});
    auto head = std::make_shared<serve::ResponseHead>(serve::new_head(e, model_id_));
    if (!p.stream) {
      // Written when done, but sent through a provider that looks at the client every 100 ms
      // while it waits: a client that hangs up cancels its request and frees the slot.
      const bool tools = p.tools;
      const std::string reply_start = p.reply_start;
      res.set_chunked_content_provider(
          "application/json",
          [ticket, head, tools, reply_start](size_t, httplib::DataSink& sink) {
            std::string text;
            if (ticket->next(text, std::chrono::milliseconds(100))) {
              if (sink.is_writable()) return true;
              ticket->cancel();  // the client went away
              return false;
            }
            const std::string body =
                ticket->error().empty()
                    ? serve::dump(serve::response(*head, ticket->result(), tools, reply_start))
                    : serve::dump(serve::error_body(
                          ApiError{500, ticket->error(), "server_error", "", ""}));
            sink.write(body.data(), body.size());
            sink.done();
            return true;
          },
          [ticket](bool success) {
            if (!success) ticket->cancel();
          });
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    auto started = std::make_shared<bool>(false);
    const bool include_usage = p.include_usage;
    auto calls = p.tools ? std::make_shared<serve::ToolCallEvents>(p.reply_start) : nullptr;
    res.set_chunked_content_provider(
        "text/event-stream",
        [ticket, head, started, include_usage, calls](size_t, httplib::DataSink& sink) {
          auto send = [&](const std::string& s) {
            if (s.empty() || sink.write(s.data(), s.size())) return true;
            ticket->cancel();  // the client went away
            return false;
          };
          if (!*started && !send(serve::role_event(*head))) return false;
          *started = true;
          std::string text;
          if (ticket->next(text, std::chrono::milliseconds(100))) {
            // Text a tool-call reader holds back sends nothing: the client is looked at below.
            const std::string events = text.empty() ? ""
                                       : calls      ? calls->piece(*head, text)
                                                    : serve::text_event(*head, text, nullptr);
            if (!events.empty()) return send(events);
            if (!sink.is_writable()) {
              ticket->cancel();
              return false;
            }
            return true;
          }
          if (!ticket->error().empty()) {
            send("data: " +
                 serve::dump(
                     serve::error_body(ApiError{500, ticket->error(), "server_error", "", ""})) +
                 "\n\n");
          } else {
            const llm::GenerateResult& r = ticket->result();
            if (!send(calls ? calls->finish(*head, r)
                            : serve::text_event(*head, "", llm::finish_name(r.finish))))
              return false;
            if (include_usage && !send(serve::usage_event(*head, r))) return false;
          }
          send(serve::done_event());
          sink.done();
          return true;
        },
        [ticket](bool success) {
          if (!success) ticket->cancel();
        });
  }

  const llm::ChatModel& model_;
  std::string model_id_;
  serve::Limits limits_;
  llm::Scheduler scheduler_;
  int64_t created_;
  httplib::Server http_;
};

void run_server(const ServeOptions& given) {
  ServeOptions o = given;
  set_num_threads(o.threads);
  // Several slots decode together through the batched graph.
  llm::ChatModel model = load_chat_model(o.model, o.dequantize, o.chat_template,
                                         o.parallel > 1 && !o.no_batch, o.kv_type, o.ctx);
  o.ctx = context_size(model.config, o.ctx);
  RLX_CHECK(o.ctx >= 2, "serve: --ctx must be at least 2, got ", o.ctx);
  std::fprintf(stderr, "%s\n%schat template: %s\n", model.config.summary().c_str(),
               rope_factors_line(model.config, o.ctx).c_str(), model.template_origin.c_str());

  Server server(o, model);
  const int port = server.bind(o.host, o.port);
  std::signal(SIGPIPE, SIG_IGN);
  g_stop = false;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  // Signal handlers may only set a flag; this thread turns it into a stop.
  std::thread watcher([&server] {
    while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    server.stop();
  });
  std::printf("rlx serve: listening on http://%s:%d (pid %d)\n", o.host.c_str(), port,
              int(getpid()));
  std::printf("  model %s, %d slot(s)%s, context %lld tokens per slot, %d threads\n",
              server.model_id().c_str(), o.parallel,
              model.batch_exe ? " decoding as one batch" : "", (long long)o.ctx, num_threads());
  std::fflush(stdout);
  server.listen();
  g_stop = true;
  watcher.join();
  std::fprintf(stderr, "rlx serve: stopped\n");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand(
      "serve",
      "Serve a GGUF language model over OpenAI-compatible HTTP (/v1/completions, "
      "/v1/chat/completions, /v1/models, /health)");
  cmd->add_option("model", o->model, "GGUF model")->required();
  cmd->add_option("--host", o->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o->port, "Port (0: any free port, printed at start)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--alias", o->alias, "Model id clients name (default: the file's stem)");
  cmd->add_option("--parallel,--np", o->parallel, "Requests served at once (slots)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("-c,--ctx", o->ctx,
                  "Context per slot, prompt and completion (default: the model's, at most 4096)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-tokens", o->max_tokens,
                  "Most tokens a request may ask for (default: up to the context)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--queue", o->queue, "Requests that may wait for a slot; more get 503")
      ->capture_default_str();
  cmd->add_option("--max-body", o->max_body, "Largest request body in bytes; larger get 413")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--chat-template", o->chat_template,
                  "Jinja chat template file replacing the model's");
  cmd->add_option("-t,--threads", o->threads, "Worker threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--dequantize", o->dequantize, "Dequantize every weight to f32 up front");
  add_kv_type_flag(cmd, o->kv_type);
  cmd->add_flag("--no-batch", o->no_batch,
                "Decode the slots one after another instead of as one batch");
  cmd->callback([o] { run_server(*o); });
}

}  // namespace rlx::cli
