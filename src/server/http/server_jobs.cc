// The job endpoints of the HTTP API: submit (one job or a batch), list (streamed), get,
// cancel, logs.
#include <httplib.h>

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "api/job_batch.h"
#include "api/job_codec.h"
#include "api/job_relations.h"
#include "base/strings.h"
#include "server/http/server.h"
#include "server/http/server_util.h"
#include "server/thread_priority.h"
#include "server/views/job_json.h"

namespace tessera {

using namespace server_internal;  // NOLINT: the handlers' own helpers

namespace {

constexpr int64_t kMaxLogRead = 1 << 20;
constexpr int64_t kDefaultPage = 100;  // jobs per page of GET /v1/jobs
constexpr int64_t kMaxPage = 1000;

// A user token's jobs are its user's, whatever the file says; a tenant token without a
// user keeps the file's user, else its own name (when that is a valid user name).
void StampUser(const Principal& who, JobSpec& spec) {
  if (!who.user.empty()) {
    spec.user = who.user;
  } else if (spec.user.empty() && who.role == Role::kTenant && CheckUserName(who.name).ok()) {
    spec.user = who.name;
  }
}

// Answers a page of GET /v1/jobs streamed in chunks: each slice of jobs is rendered
// from the published views (the controller's lock is not taken), then sent at a lower
// CPU priority. A page of 1,000 jobs (about 0.7 MB) in one piece held a core and the
// socket for tens of milliseconds, which other tenants' small requests waited behind.
constexpr size_t kPageSlice = 25;  // jobs rendered and sent per chunk

void StreamJobPage(const JobReads* reads, httplib::Response& res,
                   std::shared_ptr<JobReads::JobPage> page) {
  struct Progress {
    size_t next = 0;       // the first id not yet sent
    bool written = false;  // a job was sent (the next one needs a comma)
  };
  auto progress = std::make_shared<Progress>();
  res.set_chunked_content_provider("application/json", [reads, page, progress](
                                                           size_t, httplib::DataSink& sink) {
    const size_t at = progress->next;
    std::string text = at == 0 ? "{\"jobs\":[" : "";
    if (at >= page->jobs.size()) {
      const bool more = page->more && !page->jobs.empty();
      text += "],\"next\":" +
              (more ? "\"" + ToString(page->jobs.back()->id) + "\"" : std::string("null")) + "}";
      sink.write(text.data(), text.size());
      sink.done();
      return true;
    }
    const size_t n = std::min(kPageSlice, page->jobs.size() - at);
    RestoreThreadPriority();  // the lock is never held at the lower priority
    for (size_t i = at; i < at + n; ++i) {
      if (progress->written) {
        text += ',';
      }
      text += reads->JobText(*page->jobs[i]);
      progress->written = true;
    }
    LowerThreadPriority();
    progress->next = at + n;
    return text.empty() || sink.write(text.data(), text.size());
  });
}

// The jobs a submission makes: an array's elements, else one.
size_t JobsMade(const JobSubmission& job) {
  if (job.array.empty()) {
    return 1;
  }
  StatusOr<ArraySpec> spec = ParseArraySpec(job.array);
  return spec.ok() ? spec->indices.size() : 1;
}

// The jobs a named action acted on, as the API answers: {"jobs": [ids]}.
nlohmann::json ActedOnJson(const JobActions::ActedOn& acted) {
  nlohmann::json ids = nlohmann::json::array();
  for (JobNumber id : acted.jobs) {
    ids.push_back(id.value());
  }
  return {{"jobs", std::move(ids)}};
}

}  // namespace

void Server::ChargeJobs(const httplib::Request& req, size_t jobs) {
  // Allow took one token for the request; each job made costs its share, so that a
  // tenant's sustained submissions are bounded however they are grouped (a single
  // POST of a 1,000-element array costs as a batch of 1,000 jobs does).
  limiter_->Charge(HashToken(req.get_header_value("Authorization")),
                   static_cast<double>(jobs) / std::max(options_.batch_jobs_per_token, 1.0));
}

StatusOr<JobNumber> Server::JobIdOf(const Principal& who, const std::string& text) {
  // A plain id without the controller's lock; an array element's name through it.
  if (text.find('_') == std::string::npos) {
    return ParseId(text);
  }
  return job_actions_->ResolveJobId(who, text);
}

// POST /v1/jobs and POST /v1/jobs/batch.
void Server::SubmitRoutes() {
  httplib::Server& s = *http_;
  using Req = httplib::Request;
  using Res = httplib::Response;

  s.Post("/v1/jobs", Authed([this](const Principal& who, const Req& req, Res& res) {
           StatusOr<JobSubmission> job =
               IsYaml(req) ? ParseJobYaml(req.body, *catalog_) : ParseJobJson(req.body, *catalog_);
           if (!job.ok()) {
             SendError(res, job.status());
             return;
           }
           StampUser(who, job->spec);
           if (const size_t made = JobsMade(*job); made > 1) {
             ChargeJobs(req, made);
           }
           StatusOr<JobIntake::Submitted> out = controller_->intake().Submit(
               who, std::move(job).value(), req.get_header_value("Idempotency-Key"));
           if (!out.ok()) {
             SendError(res, out.status());
             if (out.status().code() == StatusCode::kAlreadyExists) {
               res.status = 422;  // the key's first job had another body
             }
             return;
           }
           const int code = out->replayed ? 200 : 201;
           SendJson(res, SubmittedJson(std::move(*out)), code);
         }));

  // A batch: validated whole, committed in one store commit, charged by its jobs.
  s.Post("/v1/jobs/batch", Authed([this](const Principal& who, const Req& req, Res& res) {
           StatusOr<std::vector<JobSubmission>> jobs = ParseJobBatch(
               req.body, IsYaml(req) ? BatchFormat::kYaml : BatchFormat::kJson, *catalog_);
           if (!jobs.ok()) {
             SendError(res, jobs.status());
             if (jobs.status().code() == StatusCode::kOutOfRange) {
               res.status = 413;  // over a batch's bounds
             }
             return;
           }
           size_t made = 0;
           for (JobSubmission& job : jobs.value()) {
             StampUser(who, job.spec);
             made += JobsMade(job);
           }
           ChargeJobs(req, made);
           StatusOr<JobIntake::Submitted> out = controller_->intake().SubmitBatch(
               who, std::move(jobs).value(), req.get_header_value("Idempotency-Key"));
           if (!out.ok()) {
             SendError(res, out.status());
             if (out.status().code() == StatusCode::kAlreadyExists) {
               res.status = 422;  // the key's first batch had other jobs
             }
             return;
           }
           const int code = out->replayed ? 200 : 201;
           SendJson(res, SubmittedJson(std::move(*out)), code);
         }));
}

// Cancel, hold, release and requeue, of a job ("12", "12_3") or of every element of an
// array ("12").
void Server::NamedActionRoutes() {
  httplib::Server& s = *http_;
  using Req = httplib::Request;
  using Res = httplib::Response;
  s.Post(
      R"(/v1/jobs/([^/]+)/cancel)", Authed([this](const Principal& who, const Req& req, Res& res) {
        StatusOr<JobActions::ActedOn> out = job_actions_->CancelNamed(who, req.matches[1]);
        if (!out.ok()) {
          SendError(res, out.status());
          return;
        }
        if (!out->named_one) {
          SendJson(res, ActedOnJson(*out));
          return;
        }
        // One job: its view after the cancel.
        StatusOr<std::string> text = job_reads_->GetJobText(who, out->jobs.front());
        if (!text.ok()) {
          SendError(res, text.status());
          return;
        }
        res.status = 200;
        res.set_content(std::move(text).value(), "application/json");
      }));

  // Hold, release, requeue: a job ("12", "12_3") or every element of an array ("12").
  for (const char* action : {"hold", "release", "requeue"}) {
    const std::string a = action;
    s.Post("/v1/jobs/([^/]+)/" + a, Authed([this, a](const Principal& who, const Req& req, Res& res) {
             const std::string name = req.matches[1];
             StatusOr<JobActions::ActedOn> out = a == "hold"      ? job_actions_->Hold(who, name)
                                                 : a == "release" ? job_actions_->Release(who, name)
                                                                  : job_actions_->Requeue(who, name);
             if (!out.ok()) {
               SendError(res, out.status());
               return;
             }
             SendJson(res, ActedOnJson(*out));
           }));
  }
}

// GET /v1/jobs, GET /v1/jobs/{id}, its cancel and its logs.
void Server::JobRoutes() {
  httplib::Server& s = *http_;
  using Req = httplib::Request;
  using Res = httplib::Response;
  SubmitRoutes();

  s.Get("/v1/jobs", Authed([this](const Principal& who, const Req& req, Res& res) {
          JobFilter filter;
          const std::string states = req.get_param_value("state");
          for (std::string_view st : Split(states, ',')) {
            if (!st.empty()) {
              filter.states.emplace_back(st);
            }
          }
          filter.queue = req.get_param_value("queue");
          filter.tenant = req.get_param_value("tenant");
          filter.user = req.get_param_value("user");
          StatusOr<int64_t> limit = ParseIntParam(req, "limit", kDefaultPage);
          StatusOr<int64_t> after = ParseIntParam(req, "after", 0);
          if (!limit.ok() || !after.ok()) {
            SendError(res, !limit.ok() ? limit.status() : after.status());
            return;
          }
          if (limit.value() == 0) {
            SendError(res, InvalidArgumentError("limit: must be between 1 and " +
                                                std::to_string(kMaxPage) + ", got 0"));
            return;
          }
          // Larger asks get the largest page; "next" tells the client to go on.
          const size_t limit_rows = static_cast<size_t>(std::min(limit.value(), kMaxPage));
          auto page = std::make_shared<JobReads::JobPage>(job_reads_->ListJobIds(
              who, filter, JobNumber(static_cast<uint64_t>(after.value())), limit_rows));
          // A listing costs in proportion to what it returns, so a tenant polling big pages
          // spends its rate on them rather than the controller's time that others need.
          limiter_->Charge(
              HashToken(req.get_header_value("Authorization")),
              static_cast<double>(page->jobs.size()) / std::max(options_.list_rows_per_token, 1.0));
          StreamJobPage(job_reads_.get(), res, std::move(page));
        }));

  s.Get(R"(/v1/jobs/([^/]+))", Authed([this](const Principal& who, const Req& req, Res& res) {
          StatusOr<JobNumber> id = JobIdOf(who, req.matches[1]);
          StatusOr<std::string> out = id.ok() ? job_reads_->GetJobText(who, id.value())
                                              : StatusOr<std::string>(id.status());
          if (!out.ok()) {
            SendError(res, out.status());
            return;
          }
          res.status = 200;
          res.set_content(std::move(out).value(), "application/json");
        }));

  NamedActionRoutes();

  s.Get(R"(/v1/jobs/([^/]+)/logs)", Authed([this](const Principal& who, const Req& req, Res& res) {
          StatusOr<JobNumber> id = JobIdOf(who, req.matches[1]);
          if (!id.ok()) {
            SendError(res, id.status());
            return;
          }
          StatusOr<int64_t> task = ParseIntParam(req, "task", 0);
          StatusOr<int64_t> offset = ParseIntParam(req, "offset", 0);
          if (!task.ok() || !offset.ok()) {
            SendError(res, !task.ok() ? task.status() : offset.status());
            return;
          }
          StatusOr<LogChunk> chunk = job_reads_->ReadLog(
              who, id.value(), static_cast<int>(task.value()), offset.value(), kMaxLogRead);
          if (!chunk.ok()) {
            SendError(res, chunk.status());
            return;
          }
          res.set_header("X-Log-Offset", std::to_string(chunk->next_offset));
          res.set_header("X-Job-State", chunk->job_state);
          res.set_content(chunk->data, "text/plain");
        }));

  // Where a task's terminal listens (`tessera run --pty`): as the job's other reads.
  s.Get(R"(/v1/jobs/([^/]+)/attach)", Authed([this](const Principal& who, const Req& req, Res& res) {
          StatusOr<JobNumber> id = ParseId(req.matches[1]);
          StatusOr<int64_t> task = ParseIntParam(req, "task", 0);
          StatusOr<nlohmann::json> out =
              !id.ok()     ? StatusOr<nlohmann::json>(id.status())
              : !task.ok() ? StatusOr<nlohmann::json>(task.status())
                           : job_reads_->Attach(who, id.value(), static_cast<int>(task.value()));
          if (!out.ok()) {
            SendError(res, out.status());
            return;
          }
          SendJson(res, out.value());
        }));
}

}  // namespace tessera
