import Foundation
import Testing
import DataStack

@Test func mainQueueRunsDuringAsyncTests() async {
    let ran: Bool = await withCheckedContinuation { continuation in
        DispatchQueue.main.async { continuation.resume(returning: true) }
    }
    #expect(ran)
}
