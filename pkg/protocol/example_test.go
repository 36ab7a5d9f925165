package protocol_test

import (
	"fmt"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// Subjects are built, never written by hand; a name that cannot stand as
// one subject token is refused at the edge.
func ExampleSubjectWork() {
	fmt.Println(protocol.SubjectWork("shop", "orders"))
	fmt.Println(protocol.ValidToken("queue", "orders.eu") != nil)
	// Output:
	// kagzi.v1.work.shop.orders
	// true
}

// The NATS permissions of a worker serving namespace "shop" as identity
// "pod-1", as `kagzi nats-config` writes them into a server's
// authorization block.
func ExamplePermissions() {
	p, err := protocol.Permissions(protocol.RoleWorker, "shop", "pod-1")
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Subscribe)
	// Output:
	// [kagzi.v1.inbox.worker.shop.pod-1.> kagzi.v1.cancel.shop.* kagzi.v1.dispatcher.beacon kagzi.v1.relay.up kagzi.v1.registration.shop.* kagzi.v1.reaper.up]
}
