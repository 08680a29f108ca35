// The worker's version, kept in one place: `apns-worker --version` prints it and
// `apns_worker_build_info{version}` exports it.

/// Which apns-worker this is.
public enum WorkerVersion {
    /// Semantic version; `-dev` while the next release is being built.
    public static let current = "0.13.0-dev"
}
