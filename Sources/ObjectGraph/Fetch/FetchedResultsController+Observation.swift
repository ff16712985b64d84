import Observation

// MARK: - Observation

/// A fetched results controller is observable: inside `withObservationTracking`,
/// reading ``sections``, ``fetchedObjects``, ``fetchedObjectIDs`` or
/// ``snapshot`` registers the results, and a change of them — objects entering,
/// leaving or moving, or a listed object updated — calls the tracking's
/// `onChange`, on the context's queue. Reads register only when the context
/// is observable (``ManagedObjectContext/isObservable``, which a context
/// that screens read turns on).
extension FetchedResultsController: Observable {
    /// What observers register: the results as a whole (they change together).
    var observedResults: Void { () }

    /// Registers a read of the results with the tracking in progress, if any.
    func noteObservedRead() {
        guard managedObjectContext.isObservable else { return }
        mayHaveObservers = true
        observationRegistrar.access(self, keyPath: \.observedResults)
    }

    /// Runs `change`, which changes the results, telling observers before and after.
    func tellingObservers(_ change: () -> Void) {
        guard mayHaveObservers else { return change() }
        observationRegistrar.withMutation(of: self, keyPath: \.observedResults, change)
    }
}
