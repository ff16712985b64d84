import Foundation

/// An error of the stack itself: what went wrong during setup or reset, or
/// what an import was asked that the model does not have.
public struct StackError: Error, Sendable, CustomStringConvertible, Equatable {
    /// The kind of failure.
    public enum Code: String, Sendable {
        /// No model with that name was found in the bundle.
        case modelNotFound
        /// The default store location could not be created.
        case cannotCreateStoreLocation
        /// The stack is being set up or was set up already.
        case alreadySetUp
        /// The operation needs a stack that was set up.
        case notSetUp
        /// An entity or property the operation was given is not in the stack's model.
        case notInModel
        /// An upsert's keys are of another type than the attribute that holds them.
        case keyTypeMismatch
        /// The store URL's scheme names no registered store type (``ObjectGraph/StoreType/register(_:forURLScheme:)``).
        case unknownStoreScheme
        /// The stack was closed (``StackManager/close()``): it takes no new work.
        case closed
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

extension StackError: LocalizedError {
    public var errorDescription: String? { description }
}
