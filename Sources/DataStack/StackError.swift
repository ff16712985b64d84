import Foundation

/// An error of the stack itself: what went wrong during setup or reset, or
/// what an import was asked that the model does not have.
public struct StackError: CodedError, Sendable, Equatable {
    /// The kind of failure (see ``ErrorCode``).
    public struct Code: ErrorCode {
        public typealias Failure = StackError
        /// The code's name, as written in Swift (`"notInModel"`).
        public let description: String
        private init(_ name: String) { description = name }

        /// No model with that name was found in the bundle.
        public static let modelNotFound = Code("modelNotFound")
        /// The default store location could not be created.
        public static let cannotCreateStoreLocation = Code("cannotCreateStoreLocation")
        /// The stack is being set up or was set up already.
        public static let alreadySetUp = Code("alreadySetUp")
        /// The operation needs a stack that was set up.
        public static let notSetUp = Code("notSetUp")
        /// An entity or property the operation was given is not in the stack's model.
        public static let notInModel = Code("notInModel")
        /// An upsert's keys are of another type than the attribute that holds them.
        public static let keyTypeMismatch = Code("keyTypeMismatch")
        /// The store URL's scheme names no registered store type (``ObjectGraph/StoreType/register(_:forURLScheme:)``).
        public static let unknownStoreScheme = Code("unknownStoreScheme")
        /// The stack was closed (``StackManager/close()``): it takes no new work.
        public static let closed = Code("closed")
    }

    /// The kind of failure.
    public var code: Code
    /// What happened, in words; the error's ``description``.
    public var message: String

    public init(_ code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
