// `tessera top`'s live mode: the terminal session (raw keys, signals, size), the
// refresh loop and the command (declared in top_command.h); RenderTop draws each frame.
#include "cli/top_command.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "api/units.h"
#include "base/strings.h"
#include "base/time_format.h"
#include "cli/json_read.h"
#include "cli/table.h"
#include "cli/top_paint.h"
namespace tessera {
namespace {

using namespace top_paint;  // NOLINT(google-build-using-namespace): colours

using nlohmann::json;
using json_read::Array;
using json_read::Bool;
using json_read::Field;
using json_read::Int;
using json_read::OptInt;
using json_read::OptNumber;

// ---------------------------------------------------------------------------------
// Live mode.

constexpr const char* kEnterScreen = "\x1b[?1049h\x1b[?25l";  // alternate screen, no cursor
constexpr const char* kLeaveScreen = "\x1b[?25h\x1b[?1049l";
constexpr const char* kHome = "\x1b[H";
constexpr const char* kClearLine = "\x1b[K";
constexpr const char* kClearDown = "\x1b[J";

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) {
      end = text.size();
    }
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

// Draws `lines` over the previous frame: home, each line cleared to its end, the rest
// of the screen cleared. At most `rows` lines (0: no limit), no newline after the last
// so the screen never scrolls.
void Draw(std::vector<std::string> lines, size_t rows, size_t width, std::ostream& out) {
  if (rows > 0 && lines.size() > rows) {
    const size_t hidden = lines.size() - (rows - 1);
    lines.resize(rows - 1);
    lines.push_back(FitLine("… " + std::to_string(hidden) + " more lines", width));
  }
  std::string frame = kHome;
  for (size_t i = 0; i < lines.size(); ++i) {
    frame += lines[i];
    frame += kClearLine;
    if (i + 1 < lines.size()) {
      frame += "\n";
    }
  }
  frame += kClearDown;
  out << frame;
  out.flush();
}

struct Fetched {
  json nodes;
  json jobs;
  json queues;  // null when the controller would not answer
};

StatusOr<Fetched> Fetch(ApiClient& client) {
  Fetched f;
  TESSERA_ASSIGN_OR_RETURN(f.nodes, client.GetJson("/v1/nodes"));
  TESSERA_ASSIGN_OR_RETURN(f.jobs, client.GetJson("/v1/jobs", {{"state", "pending,running,stopping"}}));
  // The cluster's job counts (all tenants); the frame falls back to the listed jobs.
  if (StatusOr<json> queues = client.GetJson("/v1/queues"); queues.ok()) {
    f.queues = std::move(queues).value();
  }
  return f;
}

// Errors a later fetch may not hit: show them in the frame and keep going.
bool Retryable(const Status& status) {
  switch (status.code()) {
    case StatusCode::kUnavailable:
    case StatusCode::kInternal:
    case StatusCode::kResourceExhausted:
    case StatusCode::kAborted:
      return true;
    default:
      return false;
  }
}

std::string Title(const ClientConfig& config, const TopOptions& options, Micros now) {
  std::string title = "tessera top  " + config.server + "  " + FormatRfc3339(now);
  if (!options.once) {
    title += "  every " + FormatDuration(options.interval) + "  q: quit";
  }
  return title;
}

// ---------------------------------------------------------------------------------
// The real terminal: raw keys (no echo, no line buffering), signals, size.

volatile std::sig_atomic_t g_stop = 0;
volatile std::sig_atomic_t g_resized = 0;

void OnStopSignal(int /*signal*/) { g_stop = 1; }
void OnResizeSignal(int /*signal*/) { g_resized = 1; }

class TerminalSession {
 public:
  TerminalSession() {
    g_stop = 0;
    g_resized = 0;
    struct sigaction action {};
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;  // no SA_RESTART: a signal ends a wait at once
    action.sa_handler = OnStopSignal;
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
    action.sa_handler = OnResizeSignal;
    sigaction(SIGWINCH, &action, &old_winch_);
    stdin_tty_ = isatty(STDIN_FILENO) == 1;
    if (stdin_tty_ && tcgetattr(STDIN_FILENO, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);  // ISIG stays: Ctrl-C works
      raw.c_cc[VMIN] = 0;
      raw.c_cc[VTIME] = 0;
      restore_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
  }
  ~TerminalSession() {
    if (restore_) {
      tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
    }
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGWINCH, &old_winch_, nullptr);
  }
  TerminalSession(const TerminalSession&) = delete;
  TerminalSession& operator=(const TerminalSession&) = delete;

  // Waits up to `micros`; false on q or a stop signal, true at the end or on a resize.
  bool Wait(Micros micros) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
    while (true) {
      if (g_stop != 0) {
        return false;
      }
      if (g_resized != 0) {
        g_resized = 0;
        return true;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return true;
      }
      // Short slices bound the wait even where a signal does not interrupt poll.
      const int ms = static_cast<int>(std::min<int64_t>(left.count(), 250));
      if (stdin_tty_) {
        pollfd fd{STDIN_FILENO, POLLIN, 0};
        if (poll(&fd, 1, ms) > 0 && (fd.revents & POLLIN) != 0) {
          char keys[64];
          const ssize_t n = read(STDIN_FILENO, keys, sizeof(keys));
          for (ssize_t i = 0; i < n; ++i) {
            if (keys[i] == 'q' || keys[i] == 'Q') {
              return false;
            }
          }
        }
      } else {
        poll(nullptr, 0, ms);
      }
    }
  }

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_winch_ {};
  termios saved_{};
  bool stdin_tty_ = false;
  bool restore_ = false;
};

std::optional<size_t> EnvSize(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr) {
    return std::nullopt;
  }
  StatusOr<int64_t> v = ParseInt64(text);
  return v.ok() && *v > 0 ? std::optional<size_t>(static_cast<size_t>(*v)) : std::nullopt;
}

TerminalSize StdoutSize() {
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) {
    return {ws.ws_col, ws.ws_row};
  }
  return {};
}

}  // namespace

int RunTop(const ClientConfig& config, const TopOptions& options, const Clock& clock,
           std::ostream& out, std::ostream& err) {
  if (options.interval <= 0) {
    return ReportError(InvalidArgumentError("--interval must be positive"), err);
  }
  if (options.bar_width < 1 || options.bar_width > 100) {
    return ReportError(InvalidArgumentError("the bar width must be in 1..100"), err);
  }
  StatusOr<std::unique_ptr<ApiClient>> created = ApiClient::Create(config);
  if (!created.ok()) {
    return ReportError(created.status(), err);
  }
  ApiClient& client = **created;
  TopOptions frame_options = options;

  if (options.once) {
    StatusOr<Fetched> fetched = Fetch(client);
    if (!fetched.ok()) {
      return ReportError(fetched.status(), err);
    }
    frame_options.title = Title(config, options, clock.NowMicros());
    out << RenderTop(fetched->nodes, fetched->jobs, fetched->queues, frame_options);
    out.flush();
    return 0;
  }

  out << kEnterScreen;
  out.flush();
  std::optional<Fetched> last;
  int exit_code = 0;
  for (int64_t frame = 1;; ++frame) {
    TerminalSize size{options.width, 0};
    if (options.terminal_size) {
      size = options.terminal_size();
    }
    frame_options.width = size.columns;
    frame_options.title = Title(config, options, clock.NowMicros());
    StatusOr<Fetched> fetched = Fetch(client);
    std::vector<std::string> lines;
    if (fetched.ok()) {
      last = std::move(fetched).value();
      lines = SplitLines(RenderTop(last->nodes, last->jobs, last->queues, frame_options));
    } else if (!Retryable(fetched.status())) {
      out << kLeaveScreen;
      out.flush();
      exit_code = ReportError(fetched.status(), err);
      break;
    } else {
      const std::string message =
          fetched.status().message() + ": retrying every " + FormatDuration(options.interval);
      Paint paint(options.color);
      if (last.has_value()) {
        TopOptions stale = frame_options;
        stale.title.clear();
        lines = SplitLines(RenderTop(last->nodes, last->jobs, last->queues, stale));
        lines.insert(lines.begin(), FitLine(paint(kRed, message + " (showing the last answer)"),
                                            size.columns));
      } else {
        lines.push_back(FitLine(paint(kRed, message), size.columns));
      }
      lines.insert(lines.begin(), FitLine(paint(kBold, frame_options.title), size.columns));
    }
    Draw(std::move(lines), size.rows, size.columns, out);
    if (options.max_frames > 0 && frame >= options.max_frames) {
      break;
    }
    const bool go_on = options.wait ? options.wait(options.interval) : [&] {
      std::this_thread::sleep_for(std::chrono::microseconds(options.interval));
      return true;
    }();
    if (!go_on) {
      break;
    }
  }
  if (exit_code == 0) {
    out << kLeaveScreen;
    out.flush();
  }
  return exit_code;
}

void AddTopCommand(CLI::App& app, int* exit_code) {
  struct Flags {
    ConnectionFlags connection;
    std::string interval = "2s";
    bool once = false;
    std::vector<std::string> nodes;
    size_t width = 0;
    bool no_color = false;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "top", "Live view of nodes and GPUs: slices, tenants, jobs, utilisation and memory");
  cmd->add_option("--interval", flags->interval, "time between refreshes, e.g. 2s or 500ms")
      ->capture_default_str();
  cmd->add_flag("--once", flags->once,
                "print one frame and exit (also when stdout is not a terminal)");
  cmd->add_option("--node", flags->nodes, "only these nodes (repeatable or comma-separated)")
      ->delimiter(',');
  cmd->add_option("--width", flags->width,
                  "cut lines to this many columns (default: $COLUMNS or the terminal's)");
  cmd->add_flag("--no-color", flags->no_color, "no colours (also with NO_COLOR set)");
  cmd->add_option("--server", flags->connection.server, kServerFlagHelp);
  cmd->add_option("--token", flags->connection.token,
                  "API token (env TESSERA_TOKEN, or a file named by TESSERA_TOKEN_FILE)");
  cmd->add_option("--ca-cert", flags->connection.ca_cert,
                  "PEM file of CA certificates for https:// (env TESSERA_CA_CERT)");
  cmd->add_flag("--insecure", flags->connection.insecure, "skip TLS certificate verification");
  cmd->callback([flags, exit_code] {
    StatusOr<ClientConfig> config = ResolveClientConfig(flags->connection, ProcessEnvironment());
    if (!config.ok()) {
      *exit_code = ReportError(config.status(), std::cerr);
      return;
    }
    StatusOr<int64_t> interval = ParseDurationMicros(flags->interval);
    if (!interval.ok() || *interval <= 0) {
      *exit_code = ReportError(
          InvalidArgumentError("--interval: " + (interval.ok() ? std::string("must be positive")
                                                              : interval.status().message())),
          std::cerr);
      return;
    }
    const bool tty = isatty(STDOUT_FILENO) == 1;
    const char* term = std::getenv("TERM");
    TopOptions o;
    o.nodes = flags->nodes;
    o.interval = *interval;
    o.once = flags->once || !tty;
    o.color = tty && !flags->no_color && std::getenv("NO_COLOR") == nullptr &&
              (term == nullptr || std::string_view(term) != "dumb");
    // Each read is bounded so that a hung controller shows up in the frame.
    config->read_timeout_ms = static_cast<int>(std::clamp<int64_t>(*interval / 1000, 5000, 60000));
    const std::optional<size_t> env_columns = EnvSize("COLUMNS");
    const size_t fixed_width = flags->width > 0 ? flags->width : env_columns.value_or(0);
    if (o.once) {
      o.width = fixed_width > 0 ? fixed_width : (tty ? StdoutSize().columns : 0);
      *exit_code = RunTop(*config, o, SystemClock(), std::cout, std::cerr);
      return;
    }
    TerminalSession session;
    o.terminal_size = [fixed_width] {
      TerminalSize size = StdoutSize();
      if (fixed_width > 0) {
        size.columns = fixed_width;
      }
      return size;
    };
    o.wait = [&session](Micros micros) { return session.Wait(micros); };
    *exit_code = RunTop(*config, o, SystemClock(), std::cout, std::cerr);
  });
}

}  // namespace tessera
