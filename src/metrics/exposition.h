// Prometheus text exposition (format 0.0.4): what /metrics answers.
//
// MetricsWriter builds one scrape's text: a family (HELP and TYPE lines) then its
// samples, label values escaped. Families are written whole, one after the other,
// so a caller computes a family's samples before starting the next. Histogram keeps
// cumulative bucket counts for a fixed set of upper bounds and is safe to Observe
// from many threads; a scrape reads a consistent-enough Snapshot (counts only grow).
//
// Names are checked against Prometheus's grammar ([a-zA-Z_:][a-zA-Z0-9_:]* for
// metrics, [a-zA-Z_][a-zA-Z0-9_]* for labels): a bad name is a programming error
// and is replaced by "invalid_name" so that the exposition stays parseable.
// Thread safety: MetricsWriter is a value used by one thread; Histogram is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType : uint8_t { kCounter, kGauge, kHistogram };

class Histogram {  // thread-safe
 public:
  // `upper_bounds` ascending; +Inf is implied.
  explicit Histogram(std::vector<double> upper_bounds);

  void Observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf last
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // per bucket (not cumulative), +Inf last
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

class MetricsWriter {
 public:
  // Starts a family: "# HELP name help" and "# TYPE name type".
  void Family(std::string_view name, MetricType type, std::string_view help);
  // One sample of the current family (a counter's or gauge's value).
  void Sample(const MetricLabels& labels, double value);
  // The current family's _bucket, _sum and _count samples.
  void Sample(const MetricLabels& labels, const Histogram::Snapshot& histogram);

  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void Line(std::string_view suffix, const MetricLabels& labels,
            const std::pair<std::string, std::string>* extra, double value);

  std::string out_;
  std::string family_;
};

// "1", "0.25", "1e+21", "+Inf", "NaN": Prometheus's float syntax, shortest exact form.
std::string FormatMetricValue(double value);
// Escapes \, " and newline for a label value.
std::string EscapeLabelValue(std::string_view value);
bool ValidMetricName(std::string_view name);
bool ValidLabelName(std::string_view name);

}  // namespace tessera
