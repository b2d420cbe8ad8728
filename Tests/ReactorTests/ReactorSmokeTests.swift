import Testing
@testable import Reactor
