// What one `bench send` run measured, in the units the report prints.

/// The figures of a measured run.
struct BenchSendFigures {
    var rate: Double
    var cpuMicrosecondsPerRequest: Double
    var p50Milliseconds: Double
    var p99Milliseconds: Double
    var peakRSSMiB: Double
    var failures: Int
    var seconds: Double
}
