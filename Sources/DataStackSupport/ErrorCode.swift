import Foundation

/// An error that says what kind of failure it is with a ``code``: every error
/// type of DataStack is one, so that a caller can match any of them the same
/// way, and a log can name the kind of any of them.
///
/// ```swift
/// do {
///     try context.save()
/// } catch let error as ObjectGraphError where error.code == .validationFailed {
///     show(error.validationErrors)          // the fields that say where
/// } catch ObjectGraphError.Code.mergeConflict {
///     retry()                               // a code alone, through `~=`
/// } catch let error as any CodedError {
///     log("\(error.code): \(error)")        // "busy: the database is locked (store at /…)"
/// }
/// ```
///
/// Each error type has the same shape: a nested `Code` struct of static codes,
/// a `code`, a `message` in words where the error carries one, the fields that
/// say where it failed (entity, key, URL, offset, …), and a `description` that
/// puts them together. That is all a type states: being a `CodedError` makes
/// it a `LocalizedError` whose `errorDescription` is its `description`, so an
/// app that shows `localizedDescription` shows the same text a log prints.
public protocol CodedError: LocalizedError, CustomStringConvertible {
    /// The type of ``code``: the error type's nested `Code` struct.
    associatedtype Code: ErrorCode where Code.Failure == Self

    /// The kind of failure.
    var code: Code { get }
}

extension CodedError {
    /// The same text as `description`: what `localizedDescription` shows.
    public var errorDescription: String? { description }
}

/// The kinds of failure of one ``CodedError`` type, as static members of its
/// nested `Code` struct (`ObjectGraphError.Code.mergeConflict`).
///
/// A struct rather than an enum, so that kinds can be added without breaking a
/// caller's exhaustive `switch` — a `switch` over a code takes a `default:` —
/// as swift-nio's `NIOAsyncWriterError` and GRDB's `DatabaseError` codes do.
/// A code prints as its name in Swift (`"mergeConflict"`).
public protocol ErrorCode: Hashable, Sendable, CustomStringConvertible {
    /// The error type whose kinds these are.
    associatedtype Failure: CodedError where Failure.Code == Self
}

extension ErrorCode {
    /// Matches an error of this code, so that `catch ObjectGraphError.Code.mergeConflict { … }`
    /// and `case PersistentStoreError.Code.busy:` work on any error; an error of
    /// another type never matches.
    public static func ~= (code: Self, error: any Error) -> Bool {
        (error as? Failure)?.code == code
    }
}
