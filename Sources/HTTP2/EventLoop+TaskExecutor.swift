// A loop as a Swift task executor: tasks that prefer it run between its I/O rounds, on its thread, so
// that what they send and the responses they await need no thread hand-off.

extension EventLoop: TaskExecutor {
    /// Runs a task job on the loop thread, in the loop's next round of jobs.
    func enqueue(_ job: consuming ExecutorJob) {
        enqueue(.task(UnownedJob(job)))
    }
}
