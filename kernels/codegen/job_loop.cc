#include "kernels/codegen/job_loop.h"

#include "kernels/codegen/core_share.h"

namespace vtpu::kernels {

void emit_job_loop(AsmWriter& w, int job, int next, int jobs, int input_sem, int input_signals,
                   const std::function<void(int, int)>& issue, const std::function<void(int)>& body,
                   const JobSplit& split) {
  const std::string top = w.new_label("job"), done = w.new_label("jobs_done");
  if (split.across_cores) {
    emit_core_share(w, job, jobs, split.unit);
    w.line("bge s{}, s{}, {}", job, jobs, done);  // a core with no share (fewer jobs than cores)
  } else {
    w.line("sli s{}, 0", job);
  }
  issue(job, 0);
  w.place(top);
  for (int set = 0; set < 2; ++set) {
    const std::string no_prefetch = w.new_label("no_prefetch");
    w.line("saddi s{}, s{}, 1", next, job);
    w.line("bge s{}, s{}, {}", next, jobs, no_prefetch);
    issue(next, 1 - set);
    w.place(no_prefetch);
    if (input_signals > 0) w.line("sem.wait sem{}, {}", input_sem + set, input_signals);
    body(set);
    w.line("smov s{}, s{}", job, next);
    w.line("bge s{}, s{}, {}", job, jobs, done);
  }
  w.line("jmp {}", top);
  w.place(done);
}

}  // namespace vtpu::kernels
