import CFaultVFS
import Foundation
import ObjectGraph

/// Faults injected into the SQLite calls on the files of one folder, through
/// the test VFS (`Tests/CFaultVFS`).
///
/// ```swift
/// let plan = FaultPlan(directory: stack.directory.url)
/// plan.arm(.write, code: SQLITE_IOERR_WRITE, after: 2)   // the third write fails, once
/// #expect(throws: PersistentStoreError.self) { try context.save() }
/// plan.disarm()
/// ```
///
/// Creating a plan installs the VFS as SQLite's default (once per process),
/// so the store under test needs no hook; connections to files outside
/// `directory` (tests running in parallel) are counted by no plan and never
/// fail. Counting starts when the plan is created and stops when it is
/// deinitialized.
final class FaultPlan: Sendable {
    /// The VFS calls a plan counts and fails.
    typealias Operation = CFaultVFSOperation

    /// How many calls fail once a fault starts.
    enum Repetition: Sendable {
        /// One call fails; the ones after it pass (a transient error).
        case once
        /// This many calls in a row fail.
        case times(Int)
        /// Every call fails until ``FaultPlan/disarm()`` (a lasting error).
        case always

        fileprivate var count: Int64 {
            switch self {
            case .once: 1
            case .times(let count): Int64(max(1, count))
            case .always: 0
            }
        }
    }

    /// The path prefix the VFS matches: the folder, with its symbolic links
    /// resolved as SQLite resolves them, and a trailing slash.
    let prefix: String

    /// Makes the fault-injecting VFS SQLite's default, once per process.
    ///
    /// A connection keeps the VFS it was opened with: call this before opening
    /// the files a plan is for (``init(directory:)`` calls it too).
    static func installVFS() {
        let installed = cfaultvfs_install()
        precondition(installed == SQLITE_OK, "the fault-injecting VFS could not be registered (SQLite error \(installed))")
    }

    init(directory: URL) {
        Self.installVFS()
        prefix = directory.resolvingSymlinksInPath().path + "/"
        cfaultvfs_watch(prefix)
    }

    deinit { cfaultvfs_unwatch(prefix) }

    /// After `after` more calls of `operation` pass, the calls that follow fail
    /// with `code` (`repeating` says how many). Replaces an earlier fault for
    /// the same operation.
    func arm(_ operation: Operation, code: Int32, after: Int = 0, repeating: Repetition = .once) {
        cfaultvfs_arm(prefix, operation, code, Int64(after), repeating.count)
    }

    /// Removes every armed fault; counting goes on.
    func disarm() { cfaultvfs_disarm(prefix) }

    /// Starts counting again from zero, with no fault armed.
    func reset() { cfaultvfs_watch(prefix) }

    /// Calls of `operation` since the plan was created or reset.
    func callCount(_ operation: Operation) -> Int { Int(cfaultvfs_call_count(prefix, operation)) }

    /// Faults injected since the plan was created or reset.
    var injectedCount: Int { Int(cfaultvfs_injected_count(prefix)) }

    /// The calls of every operation, by operation, for a dry run.
    func callCounts(of operations: [Operation]) -> [Operation: Int] {
        Dictionary(uniqueKeysWithValues: operations.map { ($0, callCount($0)) })
    }
}

extension CFaultVFSOperation: @retroactive CustomStringConvertible {
    public var description: String {
        switch self {
        case .open: "open"
        case .read: "read"
        case .write: "write"
        case .sync: "sync"
        case .truncate: "truncate"
        case .fileSize: "fileSize"
        case .lock: "lock"
        case .checkReservedLock: "checkReservedLock"
        case .shmMap: "shmMap"
        case .shmLock: "shmLock"
        }
    }
}
