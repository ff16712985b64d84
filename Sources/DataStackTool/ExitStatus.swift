import Foundation
import DataStack

/// The tool's exit statuses, from BSD's `sysexits.h`, so scripts can tell a
/// typo from a damaged store.
enum ExitStatus: Int32 {
    /// The command did what it was asked.
    case ok = 0
    /// `EX_USAGE`: an unknown command or option, a missing or extra argument,
    /// an unknown entity, a `--where` predicate that does not parse or names
    /// no property.
    case usage = 64
    /// `EX_DATAERR`: the input is not what it should be: not a SQLite file,
    /// not a Core Data store, a model file that does not load, a store that
    /// does not fit its model or cannot be migrated to it.
    case dataError = 65
    /// `EX_NOINPUT`: a file that does not exist or cannot be read.
    case noInput = 66
    /// `EX_SOFTWARE`: anything else; a bug, or a failure of the disk.
    case internalError = 70
}

/// A failure the tool reports itself: the status to exit with and the message,
/// which names the file it is about.
struct ToolError: Error, CustomStringConvertible {
    let status: ExitStatus
    let message: String

    init(_ status: ExitStatus, _ message: String) {
        self.status = status
        self.message = message
    }

    var description: String { message }

    /// A usage error (64).
    static func usage(_ message: String) -> ToolError { ToolError(.usage, message) }
}

extension ExitStatus {
    /// The status for an error thrown while working on `file`.
    static func of(_ error: any Error) -> ExitStatus {
        switch error {
        case let error as ToolError:
            return error.status
        case let error as PersistentStoreError:
            switch error.code {
            case .cannotOpen: return .noInput
            case .notAStore, .incompatibleModel, .migrationFailed, .historyNotTracked: return .dataError
            case .historyTokenMismatch, .historyExpired: return .usage
            default: return .internalError
            }
        case let error as ModelLoadingError:
            return error.code == .unreadable ? .noInput : .dataError
        case is FetchPredicateError:
            return .usage
        case let error as ObjectGraphError:
            return error.code == .unknownEntity ? .usage : .internalError
        default:
            return .internalError
        }
    }
}
