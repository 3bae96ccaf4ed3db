#include "metrics/exposition.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace tessera {
namespace {

bool NameChar(char c, bool first, bool colon) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
  return alpha || (!first && c >= '0' && c <= '9');
}

bool ValidName(std::string_view name, bool colon) {
  if (name.empty()) {
    return false;
  }
  for (size_t i = 0; i < name.size(); ++i) {
    if (!NameChar(name[i], i == 0, colon)) {
      return false;
    }
  }
  return true;
}

std::string_view TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// HELP text escapes only backslash and newline.
std::string EscapeHelp(std::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

bool ValidMetricName(std::string_view name) { return ValidName(name, true); }
bool ValidLabelName(std::string_view name) { return ValidName(name, false); }

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) {
    return "NaN";
  }
  if (std::isinf(value)) {
    return value > 0 ? "+Inf" : "-Inf";
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  return ec == std::errc() ? std::string(buf, end) : std::string("NaN");
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      counts_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {
  std::sort(bounds_.begin(), bounds_.end());
  bounds_.erase(std::unique(bounds_.begin(), bounds_.end()), bounds_.end());
}

void Histogram::Observe(double value) {
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  double sum = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(sum, sum + value, std::memory_order_relaxed)) {
  }
  count_.fetch_add(1, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.upper_bounds = bounds_;
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(running);
  }
  // The +Inf bucket must equal _count: take the count from the buckets themselves.
  s.count = running;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

void MetricsWriter::Family(std::string_view name, MetricType type, std::string_view help) {
  family_ = ValidMetricName(name) ? std::string(name) : std::string("invalid_name");
  out_ += "# HELP ";
  out_ += family_;
  out_ += ' ';
  out_ += EscapeHelp(help);
  out_ += "\n# TYPE ";
  out_ += family_;
  out_ += ' ';
  out_ += TypeName(type);
  out_ += '\n';
}

void MetricsWriter::Line(std::string_view suffix, const MetricLabels& labels,
                         const std::pair<std::string, std::string>* extra, double value) {
  out_ += family_;
  out_ += suffix;
  if (!labels.empty() || extra != nullptr) {
    out_ += '{';
    bool first = true;
    auto add = [&](const std::pair<std::string, std::string>& l) {
      if (!first) {
        out_ += ',';
      }
      first = false;
      out_ += ValidLabelName(l.first) ? l.first : std::string("invalid_name");
      out_ += "=\"";
      out_ += EscapeLabelValue(l.second);
      out_ += '"';
    };
    for (const auto& l : labels) {
      add(l);
    }
    if (extra != nullptr) {
      add(*extra);
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += FormatMetricValue(value);
  out_ += '\n';
}

void MetricsWriter::Sample(const MetricLabels& labels, double value) {
  Line("", labels, nullptr, value);
}

void MetricsWriter::Sample(const MetricLabels& labels, const Histogram::Snapshot& h) {
  for (size_t i = 0; i < h.cumulative.size(); ++i) {
    const std::pair<std::string, std::string> le{
        "le", i < h.upper_bounds.size() ? FormatMetricValue(h.upper_bounds[i]) : "+Inf"};
    Line("_bucket", labels, &le, static_cast<double>(h.cumulative[i]));
  }
  Line("_sum", labels, nullptr, h.sum);
  Line("_count", labels, nullptr, static_cast<double>(h.count));
}

}  // namespace tessera
