import DataStack
import Foundation

/// The "top movers" panel beside the watchlist: the companies updated most
/// often, kept live by a `FetchedResultsController` on the main context.
///
/// Unlike the watchlist, its members change as the import runs. After each
/// merge the controller re-checks only the companies the save touched (one
/// query), and the panel loads only the companies it shows.
// @unchecked Sendable: used only on the main queue, the main context's queue.
final class TopMoversPanel: FetchedResultsControllerDelegate, @unchecked Sendable {
    private let controller: FetchedResultsController<Company>
    /// The last change, as `+inserted −deleted ↕moved ~updated`.
    private(set) var lastChange = "—"

    init(context: ManagedObjectContext, count: Int = 10) throws {
        var request = FetchRequest<Company>()
        request.sortDescriptors = [FetchSort(key: "updateCount", ascending: false), FetchSort(key: "symbol")]
        request.fetchLimit = count
        controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
        controller.delegate = self
        try controller.performFetch()
    }

    /// The companies on the panel, most updated first.
    var companies: [Company] { controller.fetchedObjects ?? [] }

    func controller(_ controller: FetchedResultsController<Company>, didChangeContentWith change: FetchedResultsChange) {
        let difference = change.difference
        lastChange = "+\(difference.inserts.count) −\(difference.deletes.count) ↕\(difference.moves.count) ~\(difference.updates.count)"
    }
}
