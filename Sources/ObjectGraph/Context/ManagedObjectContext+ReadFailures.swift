import Foundation

// MARK: - Reads that failed: reported, remembered, never turned into data

extension ManagedObjectContext {
    /// Posted when a fault or a relationship fault could not be read; the
    /// payload is a ``FaultFulfillmentError``. See that type for the contract.
    public static let faultFulfillmentFailedNotification = Notification.Name("DataStack.ManagedObjectContext.faultFulfillmentFailed")

    /// Records a failed read of `objectID` (its values, or one to-many), posts
    /// it, and returns the error for the caller to throw.
    ///
    /// - Parameter dropsChange: a change made through a non-throwing path
    ///   could not be applied: the failure then stays until the object is
    ///   refreshed or the context rolled back or reset, and blocks every save.
    @discardableResult
    func noteReadFailure(of objectID: ObjectID, relationship: RelationshipDescription? = nil,
                         _ error: any Error, dropsChange: Bool = false) -> FaultFulfillmentError {
        var failure = (error as? FaultFulfillmentError)
            ?? FaultFulfillmentError(objectID: objectID, relationshipName: relationship?.name, underlying: error)
        failure.changeWasDropped = failure.changeWasDropped || dropsChange
            || readFailures[objectID]?.changeWasDropped == true
        readFailures[objectID] = failure
        post(.faultFulfillmentFailed(failure))
        return failure
    }

    /// Forgets a read failure of `objectID` once its values loaded after all;
    /// one that dropped a change stays (see ``noteReadFailure(of:relationship:_:dropsChange:)``).
    func noteReadSucceeded(of objectID: ObjectID) {
        guard !readFailures.isEmpty, let failure = readFailures[objectID], !failure.changeWasDropped else { return }
        readFailures[objectID] = nil
    }

    /// Throws the failure that must stop this save: one that dropped a change,
    /// or one of an object the save inserts, updates or deletes.
    func checkReadFailuresBeforeSaving() throws {
        guard !readFailures.isEmpty else { return }
        let blocking = readFailures.values.filter { failure in
            failure.changeWasDropped || registry[failure.objectID].map(hasUnsavedChange) == true
        }
        // The same state always throws the same error.
        if let first = blocking.min(by: { $0.objectID.description < $1.objectID.description }) {
            throw first
        }
    }
}
